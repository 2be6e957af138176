"""The runner's consent and run-lock rules, from scenarios (no lab): what is applied, what is skipped, and why.

* A plan that restarts a guest (``RestartGuest``) or a service (``RestartService``, also inside a guest) runs only
  with ``--allow-restart`` or the node's ``allow_restart``; a reboot only with ``--allow-reboot``. Without, the task
  is skipped, nothing is applied, and the recap records what must restart.
* The run lock is taken right before the first change; what the node showed before it was taken is read again
  (another run may have changed the node meanwhile): the task is planned anew from what the node has now.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuhost.core.actions import InGuest, PveCall, RebootHost, RestartGuest, RestartService
from gpuhost.core.guest import Guest
from gpuhost.core.operation import Args, Operation
from gpuhost.core.plan import Plan
from gpuhost.core.task import Task
from gpuhost.inventory.loader import load_inventory
from gpuhost.playbook.loader import load_playbook
from gpuhost.runner import run as runmod
from gpuhost.runner.context import RunnerHost
from gpuhost.runner.results import HostSummary
from gpuhost.runner.run import RunOptions, run_playbook
from tests.support.local import local_host, local_inventory

CT = Guest.ct(200)
CT_RESTART = RestartGuest(CT, PveCall("post", "nodes/pve1/lxc/200/status/reboot"))
SERVER = RestartService("sglang.service", "systemctl restart sglang.service")


class NoArgs(Args):
    pass


class Fixed(Operation[NoArgs]):
    """An operation whose plan is given by the test."""

    kind = "fixed"
    Args = NoArgs

    def __init__(self, plan: Plan) -> None:
        super().__init__(NoArgs())
        self._plan = plan

    def plan(self, host: Any) -> Plan:
        return self._plan


def run_one(
    monkeypatch: pytest.MonkeyPatch, actions: list[Any], consent: tuple[bool, bool]
) -> tuple[Any, list[Plan], RunnerHost]:
    applied: list[Plan] = []

    def apply_plan(host: Any, plan: Plan, replan: Any) -> Plan:
        applied.append(plan)
        return plan

    monkeypatch.setattr(runmod, "apply_plan", apply_plan)
    ctx = local_host("pve1")
    runner = runmod._HostRun(ctx, "play", HostSummary(), RunOptions(), consent, lambda r: None)
    task = Task(name="t", kind="fixed", operation=Fixed(Plan(reason="why", actions=actions)))
    return runner.task(task), applied, ctx


@pytest.mark.parametrize(
    "actions, words",
    [
        ([CT_RESTART], "CT 200 must restart for its new configuration to apply; rerun with --allow-restart"),
        ([SERVER], "sglang.service runs an older configuration and must restart; rerun with --allow-restart"),
        (
            [InGuest(CT, SERVER)],
            "sglang.service runs an older configuration and must restart; rerun with --allow-restart",
        ),
    ],
    ids=["guest", "service", "service-in-guest"],
)
def test_a_restart_without_consent_is_skipped_and_nothing_is_applied(
    monkeypatch: pytest.MonkeyPatch, actions: list[Any], words: str
) -> None:
    result, applied, ctx = run_one(monkeypatch, actions, consent=(True, False))  # a reboot consent is not enough
    assert (result.status, result.reason) == ("skipped", words)
    assert applied == []
    if isinstance(actions[0], RestartGuest):
        assert ctx.restarts_needed == {CT}


@pytest.mark.parametrize(
    "actions", [[CT_RESTART], [SERVER], [InGuest(CT, SERVER)]], ids=["guest", "service", "in-guest"]
)
def test_a_restart_with_consent_is_applied(monkeypatch: pytest.MonkeyPatch, actions: list[Any]) -> None:
    result, applied, _ = run_one(monkeypatch, actions, consent=(False, True))
    assert result.status == "changed" and [p.actions for p in applied] == [actions]


def test_a_reboot_needs_its_own_consent(monkeypatch: pytest.MonkeyPatch) -> None:
    reboot = RebootHost("kernel command line changed")
    result, applied, ctx = run_one(monkeypatch, [reboot], consent=(False, True))  # a restart consent is not enough
    assert (result.status, result.reason) == (
        "skipped",
        "reboot required (kernel command line changed); rerun with --allow-reboot",
    )
    assert applied == [] and ctx.reboot_needed == "kernel command line changed"
    result, applied, _ = run_one(monkeypatch, [reboot], consent=(True, False))
    assert result.status == "changed" and [p.actions for p in applied] == [[reboot]]


def test_a_run_of_a_restart_in_check_mode_applies_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    applied: list[Plan] = []
    monkeypatch.setattr(runmod, "apply_plan", lambda host, plan, replan: applied.append(plan) or plan)
    ctx = local_host("pve1", check=True)
    runner = runmod._HostRun(ctx, "play", HostSummary(), RunOptions(check=True), (True, True), lambda r: None)
    result = runner.task(Task(name="t", kind="fixed", operation=Fixed(Plan(reason="r", actions=[CT_RESTART]))))
    assert result.status == "changed" and applied == []


def test_the_node_is_read_again_once_the_run_lock_is_taken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first read says the line is missing; another run, which held the node's lock until now, added it
    (and changed the header). Once this run holds the lock it reads the file again: nothing is left to do, and
    the other run's file stays as that run left it."""
    path = tmp_path / "modules"
    path.write_text("# header\n")
    taken: list[float] = []

    def take_run_lock(self: RunnerHost, wait: float) -> bool:
        taken.append(wait)
        if len(taken) == 1:
            path.write_text("# header, changed by the other run\nvfio\n")  # done before it let go of the lock
            return True
        return False

    monkeypatch.setattr(RunnerHost, "take_run_lock", take_run_lock)
    book = tmp_path / "play.yml"
    book.write_text(f"- hosts: all\n  tasks:\n    - line: {{path: {path}, line: vfio, create: true}}\n")
    report = run_playbook(load_playbook(book), load_inventory(local_inventory(tmp_path, ["h1"])))
    assert [(r.status, r.error) for r in report.results] == [("ok", None)]
    assert path.read_text() == "# header, changed by the other run\nvfio\n"
    assert len(taken) == 1


def test_without_another_run_the_change_is_made_after_the_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "modules"
    path.write_text("# header\n")
    seen: list[str] = []

    def take_run_lock(self: RunnerHost, wait: float) -> bool:
        seen.append(path.read_text())  # the lock is taken before anything is written
        return len(seen) == 1

    monkeypatch.setattr(RunnerHost, "take_run_lock", take_run_lock)
    book = tmp_path / "play.yml"
    book.write_text(f"- hosts: all\n  tasks:\n    - line: {{path: {path}, line: vfio, create: true}}\n")
    report = run_playbook(load_playbook(book), load_inventory(local_inventory(tmp_path, ["h1"])))
    assert [r.status for r in report.results] == ["changed"]
    assert seen == ["# header\n"] and path.read_text() == "# header\nvfio\n"


def test_a_check_run_never_takes_the_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "modules"
    path.write_text("# header\n")
    monkeypatch.setattr(RunnerHost, "take_run_lock", lambda self, wait: pytest.fail("--check took the run lock"))
    book = tmp_path / "play.yml"
    book.write_text(f"- hosts: all\n  tasks:\n    - line: {{path: {path}, line: vfio, create: true}}\n")
    report = run_playbook(
        load_playbook(book), load_inventory(local_inventory(tmp_path, ["h1"])), RunOptions(check=True)
    )
    assert [r.status for r in report.results] == ["changed"] and path.read_text() == "# header\n"


class Broken(Fixed):
    def plan(self, host: Any) -> Plan:
        raise ValueError("boom")


def test_a_bug_in_one_task_fails_it_naming_the_exception_and_where() -> None:
    ctx = local_host("pve1")
    runner = runmod._HostRun(ctx, "play", HostSummary(), RunOptions(), (False, False), lambda r: None)
    result = runner.task(Task(name="t", kind="fixed", operation=Broken(Plan(reason="r"))))
    assert result.status == "failed"
    assert result.error == "internal error: ValueError: boom at test_consent_and_lock.py:" + str(
        Broken.plan.__code__.co_firstlineno + 1
    )


def test_the_names_of_several_guests_and_services_are_listed() -> None:
    ctx = local_host("pve1")
    runner = runmod._HostRun(ctx, "play", HostSummary(), RunOptions(), (False, False), lambda r: None)
    other = RestartGuest(Guest.ct(201), PveCall("post", "nodes/pve1/lxc/201/status/reboot"))
    assert runner._decide([CT_RESTART, other]) == (
        "skipped",
        "CT 200, CT 201 must restart for its new configuration to apply; rerun with --allow-restart",
    )
    gw = RestartService("gpuhost-smg-big.service", "systemctl restart gpuhost-smg-big.service")
    assert runner._decide([SERVER, InGuest(CT, gw)]) == (
        "skipped",
        "sglang.service, gpuhost-smg-big.service runs an older configuration and must restart; "
        "rerun with --allow-restart",
    )
    assert ctx.restarts_needed == {CT, Guest.ct(201)}


class Pending:
    """The node's record of pending handlers, as another run left it."""

    def __init__(self, on_node: set[str]) -> None:
        self.on_node = on_node

    def load(self) -> set[str]:
        return set(self.on_node)


def test_handlers_another_run_ran_while_this_one_waited_for_the_lock_are_forgotten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ctx = local_host("pve1")
    runner = runmod._HostRun(ctx, "play", HostSummary(), RunOptions(), (False, False), lambda r: None)
    runner.loaded = {"restart sglang", "refresh boot"}  # pending on the node when this run started
    runner.notified = {"restart sglang", "refresh boot", "reload units"}  # plus one this run notified itself
    runner.pending = Pending({"refresh boot"})  # type: ignore[assignment]  # the other run ran 'restart sglang'
    monkeypatch.setattr(RunnerHost, "take_run_lock", lambda self, wait: True)
    assert runner.lock() is True
    assert runner.notified == {"refresh boot", "reload units"} and runner.loaded == {"refresh boot"}
    monkeypatch.setattr(RunnerHost, "take_run_lock", lambda self, wait: False)  # held already: nothing re-read
    runner.pending = Pending(set())  # type: ignore[assignment]
    assert runner.lock() is False and runner.notified == {"refresh boot", "reload units"}


class Skipping(Fixed):
    def plan(self, host: Any) -> Plan:
        from gpuhost.core.operation import SkipTask

        raise SkipTask("gpu_path is lxc: vfio-pci binding is not expected")


class Lost(Fixed):
    def plan(self, host: Any) -> Plan:
        from gpuhost.errors import ConnectionFailed

        raise ConnectionFailed("pve1", "no reply to 3 keepalives 5 s apart")


class Refused(Fixed):
    def plan(self, host: Any) -> Plan:
        from gpuhost.errors import OperationFailed

        raise OperationFailed("VM 100: refusing to write this configuration (nothing was changed)")


def test_what_a_task_result_records() -> None:
    ctx = local_host("pve1")
    summary = HostSummary()
    seen: list[Any] = []
    runner = runmod._HostRun(ctx, "GPU host", summary, RunOptions(), (False, False), seen.append)
    ok = runner.task(Task(name="kernel args", kind="fixed", operation=Fixed(Plan(reason="in place")), role="host"))
    assert (ok.host, ok.play, ok.task, ok.operation, ok.status, ok.reason, ok.role, ok.handler) == (
        "pve1",
        "GPU host",
        "kernel args",
        "fixed",
        "ok",
        "in place",
        "host",
        False,
    )
    assert ok.error is None and ok.diff == "" and ok.stdout == "" and 0 <= ok.duration < 5
    skipped = runner.task(Task(name="vfio", kind="fixed", operation=Skipping(Plan(reason="r"))), handler=True)
    assert (skipped.status, skipped.reason, skipped.handler) == (
        "skipped",
        "gpu_path is lxc: vfio-pci binding is not expected",
        True,
    )
    refused = runner.task(Task(name="vm", kind="fixed", operation=Refused(Plan(reason="r"))))
    assert (refused.status, refused.error) == (
        "failed",
        "VM 100: refusing to write this configuration (nothing was changed)",
    )
    assert summary.unreachable is False
    lost = runner.task(Task(name="x", kind="fixed", operation=Lost(Plan(reason="r"))))
    assert (lost.status, lost.error) == ("failed", "pve1: cannot connect: no reply to 3 keepalives 5 s apart")
    assert summary.unreachable is True
    assert seen == [ok, skipped, refused, lost]
    assert (summary.ok, summary.skipped, summary.failed) == (1, 1, 2)


def test_a_staged_change_waiting_for_a_restart_is_recorded() -> None:
    ctx = local_host("pve1")
    runner = runmod._HostRun(ctx, "play", HostSummary(), RunOptions(), (False, False), lambda r: None)
    result = runner.task(Task(name="t", kind="fixed", operation=Fixed(Plan(reason="staged", waiting=(CT,)))))
    assert result.status == "ok" and runner.waited is True and ctx.restarts_needed == {CT}
