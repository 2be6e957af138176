"""SIGTERM (and SIGHUP, SIGINT) of a run: the run stops, and still ends as a run does.

The signal becomes :class:`Interrupted` in the main thread, where the runner waits for its hosts; the runner then
closes every connection (what was running on a host ends with its session, and each node's run-lock holder kills
what is left before it lets the lock go: :mod:`gpuhost.connection.remote_kill`), marks each host's run as
interrupted (not as unreachable: its connection was fine), and returns its report, so the recap, ``--json`` and
the end event of ``--json-events`` are printed as after any failed run (exit 1).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from gpuhost.errors import GpuhostError

SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


class Interrupted(GpuhostError):
    """The run got a signal that asks it to stop."""

    def __init__(self, name: str) -> None:
        self.signal_name = name
        super().__init__(f"interrupted by {name}")


@contextmanager
def signals_stop_the_run() -> Iterator[None]:
    """Inside the block (in the main thread), :data:`SIGNALS` raise :class:`Interrupted`."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: FrameType | None) -> None:
        raise Interrupted(signal.Signals(signum).name)

    old = {s: signal.signal(s, handler) for s in SIGNALS}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
