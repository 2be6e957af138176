"""Progress of long steps (a reboot's phases, …) while the run waits on them.

Each step a host reports (``gpuhost.progress`` records) is printed on stderr as one plain line
(``[pve1] reboot: down; waiting for SSH (3 s)``) and kept in ``--log``; an ``update`` record (a
download's bytes so far) only changes what the step shows. While a step lasts:

* on a terminal, a live line at the bottom of stderr shows every waiting host's step and its
  running time, redrawn each second and wiped before other output;
* elsewhere (a pipe, CI, a log), a plain ``still`` line repeats the step every ``every`` seconds, so
  a log never goes silent for long.

A task without progress of its own is a step too (``gpuhost.core.progress.task_started``: no line of its own,
then the live line and the ``still`` lines as for any step). A step ends with the host's next step or its task's
result. stdout stays for results.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import Any, TextIO

from gpuhost.redact import for_terminal


class ProgressLines(logging.Handler):
    """Attach while a run goes; ``log`` is the open :class:`~gpuhost.cli.runlog.RunLog` or None."""

    def __init__(self, log: Any = None, stream: TextIO | None = None, every: float = 30.0) -> None:
        super().__init__(logging.INFO)
        self.log = log
        self.stream = stream or sys.stderr
        self.every = every
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self._lock = threading.RLock()
        #: host → (step message, when the step began, when it was last written)
        self._steps: dict[str, tuple[str, float, float]] = {}
        self._drawn = False
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="gpuhost-progress", daemon=True)

    # -- the run's side -----------------------------------------------------------------------
    def __enter__(self) -> ProgressLines:
        logger = logging.getLogger("gpuhost.progress")
        logger.addHandler(self)
        logger.setLevel(logging.INFO)
        self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger("gpuhost.progress").removeHandler(self)
        self._stop.set()
        self._ticker.join(timeout=2)
        with self._lock:
            self._wipe()

    def done(self, host: str) -> None:
        """The host's task ended: its step is over (call before printing the task's line)."""
        with self._lock:
            self._steps.pop(host, None)
            self._wipe()

    def emit(self, record: logging.LogRecord) -> None:
        from gpuhost.core.progress import format_record

        try:
            line = for_terminal(format_record(record))
            host = str(getattr(record, "host", "?"))
            now = time.monotonic()
            message = for_terminal(record.getMessage())
            with self._lock:
                if getattr(record, "quiet", False):  # a task began: its step shows on the live line, no line
                    self._steps[host] = (message, now, now)
                    self._draw()
                    return
                if getattr(record, "update", False):  # the step's state now: the live line, the next `still`
                    _, began, written = self._steps.get(host, (message, now, now))
                    self._steps[host] = (message, began, written)
                    self._draw()
                    return
                self._wipe()
                self._write(line)
                self._steps[host] = (message, now, now)
                self._draw()
            if self.log is not None:
                self.log.line(line)
        except Exception:  # a closed stream must not break the run
            self.handleError(record)

    # -- drawing ------------------------------------------------------------------------------
    def _write(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()

    def _wipe(self) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False

    def _draw(self) -> None:
        if not self.live or not self._steps:
            return
        now = time.monotonic()
        parts = [f"{host}: {msg} {now - began:.0f} s" for host, (msg, began, _) in self._steps.items()]
        self.stream.write("\r\x1b[K… " + " | ".join(parts)[:200])
        self.stream.flush()
        self._drawn = True

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            with self._lock:
                if self.live:
                    self._draw()
                    continue
                now = time.monotonic()
                for host, (msg, began, written) in list(self._steps.items()):
                    if now - written >= self.every:
                        line = f"[{host}] still: {msg} ({now - began:.0f} s)"
                        self._write(line)
                        if self.log is not None:
                            self.log.line(line)
                        self._steps[host] = (msg, began, now)
