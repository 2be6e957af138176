"""Run an operation's waits as the runner does (:func:`gpuhost.runner.wait.run_wait`), from readings a test gives:
each look at a live fact takes the next reading, and a fake clock moves on by the wait's poll interval."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpuhost.core.plan import Plan
from gpuhost.runner.wait import Outcome, run_wait


class Readings:
    """A host whose live facts answer in turn (a journal that grows, a port that opens after some looks); other
    facts answer from ``fixed``."""

    def __init__(self, answers: dict[str, Iterator[Any]], fixed: dict[str, Any] | None = None) -> None:
        self.answers, self.fixed = answers, fixed or {}
        self.name, self.check = "pve1", False
        self.looks = 0

    def fact(self, fact: Any, *args: Any) -> Any:
        if fact.name in self.fixed:
            return self.fixed[fact.name]
        return self.read(fact, *args)

    def read(self, fact: Any, *args: Any) -> Any:
        self.looks += 1
        return next(self.answers[fact.name])


class Clock:
    """Seconds that pass only when a wait pauses."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def pause(self, seconds: float) -> bool:
        self.now += seconds
        return False


def run_waits(plan: Plan, host: Readings) -> list[Outcome]:
    """Each wait of ``plan`` in turn, until one does not end well; the outcomes."""
    out: list[Outcome] = []
    for wait in plan.waits:
        clock = Clock()
        out.append(run_wait(host, wait, clock=clock, pause=clock.pause))
        if not out[-1].ok:
            break
    return out
