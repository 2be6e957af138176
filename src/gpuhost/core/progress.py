"""Progress of long steps (a reboot's phases, a download, a build): records on the ``gpuhost.progress`` logger.

``report(host, step, message, elapsed)`` logs one INFO record with ``host``, ``step``, ``elapsed``;
the command line prints each as a line (``[pve1] reboot: back on SSH (42 s)``) on stderr and keeps it
in ``--log``. ``update=True`` marks a record that only refreshes the step's state (bytes so far): the
live line on a terminal shows it, a log sees it in the next periodic ``still`` line. Nothing is
printed when no handler is attached (the library stays quiet).

A :class:`~gpuhost.core.actions.RunCommand` may say how its streamed stdout tells its progress
(:data:`CommandProgress`): :class:`CurlMeter` (curl's progress meter), :class:`ByteCount` (a shipped
tool's own ``gpuhost-progress`` lines) or :class:`LogPhases` (lines that name phases). The runner feeds
the output to a :class:`ProgressStream`, which reports.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

LOGGER = "gpuhost.progress"
progress_log = logging.getLogger(LOGGER)


def report(host: str, step: str, message: str, elapsed: float | None = None, *, update: bool = False) -> None:
    progress_log.info(
        "%s: %s",
        step,
        message,
        extra={"host": host, "step": step, "elapsed": elapsed, "progress": message, "update": update},
    )


def task_started(host: str, task: str) -> None:
    """A task began on ``host``: a quiet record (no line of its own) that starts a step, so a task without
    progress of its own still shows a live line with its running time on a terminal and a periodic ``still``
    line in a log; the task's own progress and its result replace it."""
    progress_log.info(
        "%s: running", task, extra={"host": host, "step": task, "elapsed": None, "progress": "running", "quiet": True}
    )


def format_record(record: logging.LogRecord) -> str:
    host = getattr(record, "host", "?")
    elapsed = getattr(record, "elapsed", None)
    took = f" ({elapsed:.0f} s)" if isinstance(elapsed, int | float) else ""
    return f"[{host}] {record.getMessage()}{took}"


@dataclass(frozen=True)
class CurlMeter:
    """The command's stdout carries curl's progress meter (curl without ``-s``, its stderr sent to stdout)."""

    step: str


@dataclass(frozen=True)
class LogPhases:
    """Lines of the command's stdout name phases: a line matching ``pattern`` (a regex, searched) starts
    the phase ``words``. Lines that name no phase are the command's output."""

    step: str
    phases: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ByteCount:
    """The command's stdout carries lines ``gpuhost-progress done=BYTES total=BYTES t=SECONDS`` (:func:`count_line`),
    printed every few seconds by a shipped tool: the bytes there so far of those it must have, and the time since
    it started. The rate is read from two lines' bytes and times, not from when SSH delivered them."""

    step: str


CommandProgress = CurlMeter | ByteCount | LogPhases

COUNT_TAG = "gpuhost-progress"
_COUNT = re.compile(rf"^{COUNT_TAG} done=(\d+) total=(\d+) t=(\d+(?:\.\d+)?)\s*$")


def count_line(line: str) -> tuple[int, int, float] | None:
    """(done, total, seconds) of a ``gpuhost-progress`` line; None for any other line."""
    m = _COUNT.match(line)
    return (int(m[1]), int(m[2]), float(m[3])) if m else None


_UNITS = {"": 1, "k": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}
_SIZE = r"\d+(?:\.\d+)?[kMGTP]?"
_TIME = r"(?:\d+:\d\d:\d\d|--:--:--|\d+d \d\dh|\d+d)"
#: a row of curl's meter: % Total, % Received, % Xferd, Dload, Upload, Total, Spent, Left, Current
_ROW = re.compile(
    rf"^\s*(\d+)\s+({_SIZE})\s+(\d+)\s+({_SIZE})\s+(\d+)\s+({_SIZE})\s+({_SIZE})\s+({_SIZE})"
    rf"\s+({_TIME})\s+({_TIME})\s+({_TIME})\s+({_SIZE})\s*$"
)
_HEADER = re.compile(r"^\s*(% Total\s+% Received|Dload\s+Upload)")


@dataclass(frozen=True)
class MeterRow:
    percent: int
    total: int  # bytes (curl rounds to its unit: 11.4M)
    received: int
    average: int  # bytes per second since the start
    current: int  # bytes per second now


def size(text: str) -> int:
    """curl's sizes: bytes, or a number with k, M, G… (powers of 1024)."""
    unit = text[-1] if text[-1] in "kMGTP" else ""
    return int(float(text[: len(text) - len(unit)]) * _UNITS[unit])


def meter_row(line: str) -> MeterRow | None:
    m = _ROW.match(line)
    if m is None:
        return None
    return MeterRow(int(m[3]), size(m[2]), size(m[4]), size(m[7]), size(m[12]))


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError  # pragma: no cover


class ProgressStream:
    """A ``stdout_sink``: reads a command's progress as it streams, reports it for ``host``, keeps the
    rest. :meth:`close` reports the end and returns the output that was not progress."""

    def __init__(self, host: str, spec: CommandProgress, clock: Callable[[], float] = time.monotonic) -> None:
        self.host = host
        self.spec = spec
        self._clock = clock
        self._start = self._clock()
        self._buf = b""
        self._kept: list[str] = []
        self._last: MeterRow | None = None
        self._phase: str | None = None
        self._counts: list[tuple[int, int, float]] = []  # the first and the last two ``gpuhost-progress`` lines

    def _elapsed(self) -> float:
        return self._clock() - self._start

    def write(self, data: bytes) -> int:
        self._buf += data
        *lines, self._buf = re.split(rb"\r|\n", self._buf)
        for raw in lines:
            self._line(raw.decode("utf-8", "replace"))
        return len(data)

    def flush(self) -> None:
        pass

    def _line(self, line: str) -> None:
        spec = self.spec
        if isinstance(spec, CurlMeter):
            row = meter_row(line)
            if row is None:
                if line.strip() and not _HEADER.match(line):
                    self._kept.append(line)
                return
            if self._last is None:
                report(self.host, spec.step, "started", 0.0)
            self._last = row
            of = f" of {human(row.total)} ({row.percent}%)" if row.total else ""
            report(
                self.host,
                spec.step,
                f"{human(row.received)}{of}, {human(row.current)}/s",
                self._elapsed(),
                update=True,
            )
            return
        if isinstance(spec, ByteCount):
            self._count(spec, line)
            return
        for pattern, words in spec.phases:
            if re.search(pattern, line):
                if words != self._phase:
                    self._phase = words
                    report(self.host, spec.step, words, self._elapsed())
                break
        self._kept.append(line)

    def _count(self, spec: ByteCount, line: str) -> None:
        count = count_line(line)
        if count is None:
            self._kept.append(line)
            return
        if not self._counts:
            report(self.host, spec.step, f"started: {human(count[1] - count[0])} to fetch", 0.0)
            self._counts = [count]
            return
        self._counts = [self._counts[0], self._counts[-1], count]
        (done, total, t), (before, _, then) = count, self._counts[-2]
        rate = (done - before) / (t - then) if t > then else 0.0
        of = f" of {human(total)} ({100 * done // total}%)" if total else ""
        report(self.host, spec.step, f"{human(done)}{of}, {human(rate)}/s", self._elapsed(), update=True)

    def close(self, ok: bool) -> str:
        """The command ended (``ok``: with a status it may end with): report how, return the kept output."""
        if self._buf:
            self._line(self._buf.decode("utf-8", "replace"))
            self._buf = b""
        spec = self.spec
        if isinstance(spec, CurlMeter) and self._last is not None:
            row = self._last
            if ok:
                report(
                    self.host,
                    spec.step,
                    f"{human(row.received)} downloaded, {human(row.average)}/s average",
                    self._elapsed(),
                )
            else:
                report(self.host, spec.step, f"stopped after {human(row.received)}", self._elapsed())
        elif isinstance(spec, ByteCount) and self._counts:
            (first, _, t0), (done, _, t) = self._counts[0], self._counts[-1]
            if ok:
                average = (done - first) / (t - t0) if t > t0 else 0.0
                said = f"{human(done - first)} downloaded, {human(average)}/s average"
            else:
                said = f"stopped after {human(done - first)}"
            report(self.host, spec.step, said, self._elapsed())
        elif isinstance(spec, LogPhases) and self._phase is not None:
            report(self.host, spec.step, "done" if ok else f"failed in phase: {self._phase}", self._elapsed())
        return "".join(line + "\n" for line in self._kept)
