"""The scheduler's batch lines of an SGLang log: how many requests ran and how many waited, batch by batch.

SGLang's scheduler logs a ``Prefill batch`` line for each new prefill batch and a ``Decode batch`` line every
``--decode-log-interval`` decode steps (sglang 0.5.23 ``managers/scheduler_components/metrics_reporter.py``
``log_prefill_stats`` and ``log_decode_stats``): both carry ``#running-req: N`` (the requests admitted) and
``#queue-req: N`` (the requests in the waiting queue). Older releases write ``Prefill batch.`` /
``Decode batch.`` with a period (sglang#1953, #938); a paste may cut a line mid-field (sglang#19712): a line
without both figures is no batch line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_BATCH = re.compile(r"\b(Prefill|Decode) batch[.,] ")
_RUNNING = re.compile(r"#running-req: (\d+)")
_QUEUED = re.compile(r"#queue-req: (\d+)")


@dataclass(frozen=True)
class BatchLine:
    number: int  #: the line's number in the text read (1-based)
    kind: str  #: ``Prefill`` or ``Decode``
    running: int
    queued: int
    text: str


def batch_lines(lines: Iterable[str]) -> list[BatchLine]:
    """Every complete batch line of ``lines``, in order."""
    out = []
    for n, line in enumerate(lines, start=1):
        kind = _BATCH.search(line)
        running = _RUNNING.search(line)
        queued = _QUEUED.search(line)
        if kind and running and queued:
            out.append(BatchLine(n, kind.group(1), int(running.group(1)), int(queued.group(1)), line.rstrip("\n")))
    return out
