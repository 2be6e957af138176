"""``--log FILE``: the whole run in a plain-text file, redacted, for tickets and post-mortems.

Every line starts with its UTC time to the millisecond (``2026-12-01T19:40:05.123Z``). The file gets a header
(gpuhost version, the command line, the time), every remote command with its
exit code and timing (what ``-v`` shows, whether or not ``-v`` is given), every task result with its
diff and error, and the recap. It is appended to, so one file can hold several runs.
"""

from __future__ import annotations

import logging
import shlex
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from gpuhost import __version__
from gpuhost.errors import UsageError
from gpuhost.redact import redact

if TYPE_CHECKING:
    from gpuhost.runner.results import RunReport, TaskResult


class _CommandRecords(logging.Handler):
    def __init__(self, log: RunLog) -> None:
        super().__init__(logging.DEBUG)
        self.log = log

    def emit(self, record: logging.LogRecord) -> None:
        from gpuhost.cli.verbose import format_record

        try:
            self.log.line(format_record(record))
        except Exception:  # a full disk must not break the run
            self.handleError(record)


class RunLog:
    """An open run log; use as a context manager."""

    def __init__(self, path: Path, check: bool = False) -> None:
        self.path = path
        self.check = check
        self._lock = threading.Lock()
        self._stream: TextIO | None = None
        self._handler: _CommandRecords | None = None

    def __enter__(self) -> RunLog:
        try:
            self._stream = self.path.open("a", encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--log {self.path}: cannot write: {exc.strerror or exc}") from None
        when = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self.line(f"=== gpuhost {__version__} {when}")
        self.line("$ gpuhost " + shlex.join(sys.argv[1:]))
        logger = logging.getLogger("gpuhost.remote")
        self._handler = _CommandRecords(self)
        logger.addHandler(self._handler)
        logger.setLevel(logging.DEBUG)
        return self

    def __exit__(self, *exc: object) -> None:
        logger = logging.getLogger("gpuhost.remote")
        if self._handler is not None:
            logger.removeHandler(self._handler)
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def line(self, text: str) -> None:
        if self._stream is None:
            return
        now = time.time()  # UTC with the date: a log appended to over days, or read beside other machines' logs
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"
        with self._lock:
            for part in redact(text).splitlines() or [""]:
                self._stream.write(f"{stamp} {part}\n")
            self._stream.flush()

    def task(self, result: TaskResult) -> None:
        from gpuhost.cli.output import task_line

        self.line(task_line(result, self.check))
        for warning in result.warnings:
            self.line(f"    [WARNING]: {warning}")
        if result.stdout:
            self.line("\n".join("    | " + o for o in result.stdout.splitlines()))
        if result.diff:
            self.line("\n".join("    " + d for d in result.diff.splitlines()))

    def recap(self, report: RunReport) -> None:
        from gpuhost.cli.output import recap_lines

        for text in recap_lines(report):
            self.line(text)
