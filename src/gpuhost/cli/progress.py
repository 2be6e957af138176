"""Progress of long steps on stderr, one plain line each (``[pve1] reboot: back on SSH (41 s)``), and
in the ``--log`` file. stdout stays for results (``--json``, ``--json-events``)."""

from __future__ import annotations

import logging
import sys
from typing import Any

from gpuhost.redact import redact


class _Lines(logging.Handler):
    def __init__(self, log: Any) -> None:
        super().__init__(logging.INFO)
        self.log = log

    def emit(self, record: logging.LogRecord) -> None:
        from gpuhost.connection.progress import format_record

        try:
            line = redact(format_record(record))
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
            if self.log is not None:
                self.log.line(line)
        except Exception:  # a closed stream must not break the run
            self.handleError(record)


class ProgressLines:
    """Attach while a run goes; ``log`` is the open :class:`~gpuhost.cli.runlog.RunLog` or None."""

    def __init__(self, log: Any = None) -> None:
        self.handler = _Lines(log)

    def __enter__(self) -> ProgressLines:
        logger = logging.getLogger("gpuhost.progress")
        logger.addHandler(self.handler)
        logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger("gpuhost.progress").removeHandler(self.handler)
