"""Handlers over one host's run, from scenarios (runner/run.py ``_HostRun.run``/``flush``): a changed task notifies
its handler, which runs once at the end; a handler refused for want of consent or one that failed stays recorded
on the node for the next run; handlers an earlier run left pending run again. The node's record is a fake that
keeps what the runner saved (the real one is a file on the node: runner/handler_state.py)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuhost.core.actions import RestartService, RunCommand
from gpuhost.core.plan import Plan
from gpuhost.core.task import Task
from gpuhost.runner import run as runmod
from gpuhost.runner.results import HostSummary
from gpuhost.runner.run import RunOptions
from tests.support.local import local_host
from tests.unit.runner.test_consent_and_lock import Broken, Fixed


class Record:
    """The node's record of pending handlers."""

    def __init__(self, on_node: set[str]) -> None:
        self.on_node = set(on_node)
        self.saves: list[set[str]] = []

    def __call__(self, ctx: Any, names: set[str]) -> Record:
        self.names = names
        return self

    def reads(self) -> list[Any]:
        return []

    def load(self) -> set[str]:
        return set(self.on_node)

    def save(self, notified: set[str]) -> None:
        self.saves.append(set(notified))
        self.on_node = set(notified)


CHANGE = Plan(reason="changed", actions=[RunCommand("true")])
SAME = Plan(reason="as it is")


def host_run(
    monkeypatch: pytest.MonkeyPatch, record: Record, consent: tuple[bool, bool] = (False, False), **opts: Any
) -> tuple[runmod._HostRun, list[Any]]:
    monkeypatch.setattr(runmod, "PendingHandlers", record)
    monkeypatch.setattr(runmod, "prefetch", lambda ctx, tasks, reads: None)
    monkeypatch.setattr(runmod, "apply_plan", lambda host, plan, replan: plan)
    results: list[Any] = []
    runner = runmod._HostRun(local_host("pve1"), "play", HostSummary(), RunOptions(**opts), consent, results.append)
    return runner, results


def task(name: str, plan: Plan, notify: tuple[str, ...] = ()) -> Task:
    return Task(name=name, kind="fixed", operation=Fixed(plan), notify=notify)


def test_a_changed_task_notifies_its_handler_which_runs_once_at_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    record = Record(set())
    runner, results = host_run(monkeypatch, record)
    tasks = [task("a", CHANGE, ("h",)), task("b", CHANGE, ("h",)), task("c", SAME, ("other",))]
    handlers = [task("h", CHANGE), task("other", CHANGE)]
    assert runner.run(tasks, handlers) is True
    assert [(r.task, r.status, r.handler) for r in results] == [
        ("a", "changed", False),
        ("b", "changed", False),
        ("c", "ok", False),
        ("h", "changed", True),
    ]
    assert record.names == {"h", "other"}
    assert record.saves == [{"h"}, {"h"}, set()]  # recorded once notified, cleared once run


def test_a_handler_refused_for_consent_stays_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    record = Record(set())
    runner, results = host_run(monkeypatch, record)
    restart = Plan(reason="restart", actions=[RestartService("sglang.service", "systemctl restart sglang.service")])
    assert runner.run([task("a", CHANGE, ("restart sglang",))], [task("restart sglang", restart)]) is True
    assert [(r.task, r.status) for r in results] == [("a", "changed"), ("restart sglang", "skipped")]
    assert record.on_node == {"restart sglang"}


def test_a_failed_handler_stays_recorded_and_fails_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    record = Record(set())
    runner, results = host_run(monkeypatch, record)
    broken = Task(name="h", kind="fixed", operation=Broken(CHANGE))
    assert runner.run([task("a", CHANGE, ("h",)), task("b", CHANGE)], [broken, task("never", CHANGE)]) is False
    assert [(r.task, r.status) for r in results] == [("a", "changed"), ("b", "changed"), ("h", "failed")]
    assert record.on_node == {"h"}


def test_a_failed_task_stops_the_host_before_its_handlers(monkeypatch: pytest.MonkeyPatch) -> None:
    record = Record(set())
    runner, results = host_run(monkeypatch, record)
    broken = Task(name="b", kind="fixed", operation=Broken(CHANGE))
    assert runner.run([task("a", CHANGE, ("h",)), broken, task("c", CHANGE)], [task("h", CHANGE)]) is False
    assert [r.task for r in results] == ["a", "b"] and record.on_node == {"h"}


def test_handlers_an_earlier_run_left_pending_run_again(monkeypatch: pytest.MonkeyPatch) -> None:
    record = Record({"h"})
    runner, results = host_run(monkeypatch, record)
    assert runner.run([task("a", SAME)], [task("h", CHANGE)]) is True
    assert [(r.task, r.status) for r in results] == [("a", "ok"), ("h", "changed")]
    assert record.on_node == set()


def test_a_staged_change_notifies_its_handler(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuhost.core.guest import Guest

    record = Record(set())
    runner, results = host_run(monkeypatch, record, consent=(False, True))
    staged = Plan(reason="staged", waiting=(Guest.ct(200),))
    assert runner.run([task("a", staged, ("h",))], [task("h", CHANGE)]) is True
    assert [(r.task, r.status) for r in results] == [("a", "ok"), ("h", "changed")]


def test_flush_handlers_runs_them_where_it_stands(monkeypatch: pytest.MonkeyPatch) -> None:
    record = Record(set())
    runner, results = host_run(monkeypatch, record)
    flush = Task(name="flush", kind="meta")
    tasks = [task("a", CHANGE, ("h",)), flush, task("b", CHANGE, ("h",))]
    assert runner.run(tasks, [task("h", CHANGE)]) is True
    assert [r.task for r in results] == ["a", "h", "b", "h"]


def test_start_at_task_and_tags_select_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    record = Record(set())
    runner, results = host_run(monkeypatch, record, start_at_task="b")
    tasks = [task("a", CHANGE), task("b", CHANGE), task("c", CHANGE)]
    assert runner.run(tasks, []) is True
    assert [r.task for r in results] == ["b", "c"]
    tagged, got = host_run(monkeypatch, Record(set()), tags=frozenset({"x"}))
    t = Task(name="t", kind="fixed", operation=Fixed(CHANGE), tags=("x",))
    assert tagged.run([task("a", CHANGE), t], []) is True and [r.task for r in got] == ["t"]
