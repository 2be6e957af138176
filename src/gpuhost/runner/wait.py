"""Carry out a :class:`~gpuhost.core.actions.WaitUntil`: re-read its fact, judge each reading with its pure
predicates, report its stages as progress, honour its bounds, and end at once when the run is interrupted.

Operations never sleep: they return a wait, and this is the only place gpuhost polls a host. A reading is always
a new read (:meth:`~gpuhost.runner.context.RunnerHost.read`), never the fact cache.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any, Protocol, TypeVar

from gpuhost.core.actions import RunCommand, WaitUntil, seconds
from gpuhost.core.facts import Fact
from gpuhost.core.progress import report
from gpuhost.errors import OperationFailed

T = TypeVar("T")

#: set while a run is being interrupted (SIGINT, SIGTERM): every wait ends at its next tick
STOP = threading.Event()
#: seconds between two "still in this stage" progress records
REPORT_EVERY = 30.0


class Reader(Protocol):
    """What a wait needs of a host: its name and a fresh read of a fact (the runner's host, or a test's)."""

    @property
    def name(self) -> str: ...

    def read(self, fact: Fact[T], *args: Any) -> T: ...


class WaitInterrupted(OperationFailed):
    """The run was interrupted during a wait: nothing the wait would have done on failure was done."""


@dataclass
class Outcome:
    """How a wait ended: done (``ok``) or not, and what to tell the operator."""

    ok: bool
    message: str
    #: what to run before the failure is reported (a stage's overrun actions)
    actions: tuple[RunCommand, ...] = ()


def run_wait(
    host: Reader,
    wait: WaitUntil[Any],
    *,
    clock: Callable[[], float] = time.monotonic,
    pause: Callable[[float], bool] | None = None,
) -> Outcome:
    """Poll until ``wait`` is done (ok) or failed, ran out or stayed too long in a stage (not ok). ``pause(s)``
    waits ``s`` seconds and returns True when the run is interrupted (default: :data:`STOP`)."""
    pause = pause or STOP.wait
    start = clock()
    stage_name: str | None = None
    stage_since = start
    last_report = start
    doubted = False  # a failure was read once: the next reading confirms it (or not)
    trail: tuple[str, ...] = ()
    while True:
        value = host.read(wait.fact, *wait.args)
        now = clock()
        took = now - start
        failure = wait.failed(value)
        if failure is not None and (doubted or not wait.confirm_failure):
            return Outcome(False, failure)
        doubted = failure is not None
        if wait.trail is not None:  # the stages passed since the last look, each once
            passed = wait.trail(value)
            for name in passed[len(trail) :]:
                report(host.name, wait.step, name, took)
            trail = passed if len(passed) > len(trail) else trail
        done = wait.done(value) if failure is None else None
        if done is not None:
            report(host.name, wait.step, done, took)
            return Outcome(True, done)
        stage = wait.stage(value)
        if stage.name != stage_name:
            stage_name, stage_since, last_report = stage.name, now, now
            if not trail or trail[-1] != stage.name:
                report(host.name, wait.step, stage.name, took)
        elif now - last_report >= REPORT_EVERY:
            last_report = now
            report(host.name, wait.step, f"{stage.name} for {seconds(now - stage_since)}", took, update=True)
        if not doubted and stage.bound is not None and now - stage_since > stage.bound:
            said = f"{stage.name} for {seconds(now - stage_since)}, bound {seconds(stage.bound)}"
            return Outcome(False, f"{stage.overrun} ({said})", stage.on_overrun)
        if not doubted and took > wait.timeout:
            shown = f" ({wait.explain(value)})" if wait.explain is not None else ""
            hint = f"; {wait.hint}" if wait.hint else ""
            return Outcome(False, f"gave up after {seconds(wait.timeout)} waiting until {wait.what}{shown}{hint}")
        if pause(wait.poll):
            raise WaitInterrupted(
                f"{host.name}: interrupted after {seconds(clock() - start)} waiting until {wait.what} "
                f"({stage_name}); nothing was stopped"
            )


@contextmanager
def interruptible() -> Iterator[None]:
    """While a run goes: SIGINT and SIGTERM end every wait at its next tick, then have their usual effect
    (Ctrl-C raises KeyboardInterrupt, SIGTERM exits 143). Only the main thread can install signal handlers;
    elsewhere (a run inside a test's thread) this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def handler(signum: int, frame: FrameType | None) -> None:
        STOP.set()
        before = previous.get(signal.Signals(signum))
        if callable(before):
            before(signum, frame)
        elif signum == signal.SIGINT:
            raise KeyboardInterrupt
        else:
            raise SystemExit(128 + signum)

    for sig in previous:
        signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, before in previous.items():
            signal.signal(sig, before)
        STOP.clear()
