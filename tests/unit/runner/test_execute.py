"""The run over hosts and plays (runner/run.py ``execute``), from local scenarios: the recap a user reads, a host
whose roles cannot be prepared or whose run raised, a failed host left out of the next play, the inventory's
consent, each result handed to the caller as it comes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuhost.errors import OperationFailed
from gpuhost.inventory.loader import load_inventory
from gpuhost.playbook.loader import load_playbook
from gpuhost.runner import run as runmod
from gpuhost.runner.results import RunReport
from gpuhost.runner.run import RunOptions, run_playbook
from tests.support.local import local_inventory

TWO_PLAYS = """
- name: first
  hosts: all
  tasks:
    - command: {cmd: 'test "{{ inventory_hostname }}" != bad'}
- name: second
  hosts: all
  tasks:
    - command: {cmd: "true"}
"""


def book(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "play.yml"
    path.write_text(text)
    return path


def test_the_recap_and_a_failed_host_left_out_of_the_next_play(tmp_path: Path) -> None:
    seen: list[Any] = []
    path = book(tmp_path, TWO_PLAYS)
    inventory = load_inventory(local_inventory(tmp_path, ["good", "bad"]))
    report = run_playbook(load_playbook(path), inventory, RunOptions(on_result=seen.append, forks=1))
    assert report.playbook == str(path) and report.check is False and report.duration > 0
    assert [(r.host, r.play, r.status) for r in report.results] == [
        ("good", "first", "changed"),
        ("bad", "first", "failed"),
        ("good", "second", "changed"),
    ]
    assert seen == report.results
    good = report.hosts["good"]
    assert (good.ok, good.changed, good.failed, good.skipped, good.unreachable) == (0, 2, 0, 0, False)
    assert (good.reboot_required, good.rebooted, good.restart_required) == (False, False, [])
    assert (report.hosts["bad"].failed, report.hosts["bad"].changed) == (1, 0)
    assert report.exit_code == 1


def test_a_host_whose_roles_cannot_be_prepared_fails_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = runmod._expand

    def expand(hp: Any, ctx: Any) -> Any:
        if ctx.name == "bad":
            raise OperationFailed("role lxc_gpu: CT 999 is not in the inventory")
        return real(hp, ctx)

    monkeypatch.setattr(runmod, "_expand", expand)
    inventory = load_inventory(local_inventory(tmp_path, ["good", "bad"]))
    report = run_playbook(load_playbook(book(tmp_path, TWO_PLAYS)), inventory, RunOptions(forks=1))
    (failed,) = [r for r in report.results if r.host == "bad"]
    assert (failed.play, failed.task, failed.operation, failed.status, failed.reason, failed.duration) == (
        "first",
        "prepare roles",
        "facts",
        "failed",
        "",
        0.0,
    )
    assert failed.error == "role lxc_gpu: CT 999 is not in the inventory"
    assert (report.hosts["bad"].failed, report.hosts["bad"].unreachable) == (1, False)
    assert [r.play for r in report.results if r.host == "good"] == ["first", "second"]


def test_a_host_whose_run_raised_fails_naming_the_bug(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def run(self: Any, tasks: Any, handlers: Any) -> bool:
        raise KeyError("boom")

    monkeypatch.setattr(runmod._HostRun, "run", run)
    report = run_playbook(load_playbook(book(tmp_path, TWO_PLAYS)), load_inventory(local_inventory(tmp_path, ["h1"])))
    (r,) = report.results
    assert (r.host, r.play, r.task, r.operation, r.status, r.reason, r.duration) == (
        "h1",
        "first",
        "run",
        "runner",
        "failed",
        "",
        0.0,
    )
    assert r.error is not None and r.error.startswith("internal error: KeyError: 'boom' at test_execute.py:")
    assert report.hosts["h1"].failed == 1 and report.hosts["h1"].unreachable is False


def test_a_lost_connection_in_a_run_marks_the_host_unreachable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuhost.errors import ConnectionFailed

    def run(self: Any, tasks: Any, handlers: Any) -> bool:
        raise ConnectionFailed("h1", "connection reset")

    monkeypatch.setattr(runmod._HostRun, "run", run)
    report = run_playbook(load_playbook(book(tmp_path, TWO_PLAYS)), load_inventory(local_inventory(tmp_path, ["h1"])))
    assert report.results[0].error == "h1: cannot connect: connection reset"
    assert report.hosts["h1"].unreachable is True and report.exit_code == 1


def test_the_inventory_s_restart_consent_reaches_the_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, tuple[bool, bool]] = {}
    real = runmod._HostRun.__init__

    def init(self: Any, ctx: Any, play: str, summary: Any, opts: Any, consent: tuple[bool, bool], emit: Any) -> None:
        seen[ctx.name] = consent
        real(self, ctx, play, summary, opts, consent, emit)

    monkeypatch.setattr(runmod._HostRun, "__init__", init)
    inv = local_inventory(tmp_path, ["h1", "h2"])
    inv.write_text(
        inv.read_text().replace(
            "  h1:\n    address: 127.0.0.1\n    connection: local",
            "  h1:\n    address: 127.0.0.1\n    connection: local\n    allow_restart: true",
        )
    )
    play = load_playbook(book(tmp_path, "- hosts: all\n  tasks:\n    - command: {cmd: 'true'}\n"))
    run_playbook(play, load_inventory(inv))
    assert seen == {"h1": (False, True), "h2": (False, False)}
    run_playbook(play, load_inventory(inv), RunOptions(allow_reboot=True))
    assert seen == {"h1": (True, True), "h2": (True, False)}


def test_a_check_run_says_so(tmp_path: Path) -> None:
    report = run_playbook(
        load_playbook(book(tmp_path, TWO_PLAYS)),
        load_inventory(local_inventory(tmp_path, ["h1"])),
        RunOptions(check=True),
    )
    assert report.check is True and [r.status for r in report.results] == ["changed", "changed"]


def _two_plays(tmp_path: Path, first: tuple[str, str], second: tuple[str, str]) -> RunReport:
    """A playbook of two plays, each ensuring one line (file name, line) on the local host h1; run once."""
    plays = "".join(
        f"- name: {name}\n  hosts: all\n  tasks:\n    - line: {{path: {tmp_path}/{file}, line: {line}}}\n"
        for name, (file, line) in (("first", first), ("second", second))
    )
    inventory = load_inventory(local_inventory(tmp_path, ["h1"]))
    return run_playbook(load_playbook(book(tmp_path, plays)), inventory, RunOptions(forks=1))


def test_a_converged_run_of_two_plays_reads_both_plays_facts_in_one_round_trip(tmp_path: Path) -> None:
    (tmp_path / "a.conf").write_text("alpha\n")
    (tmp_path / "b.conf").write_text("beta\n")
    report = _two_plays(tmp_path, ("a.conf", "alpha"), ("b.conf", "beta"))
    assert [(r.play, r.status) for r in report.results] == [("first", "ok"), ("second", "ok")]
    assert report.hosts["h1"].round_trips == 1  # the second play's file was read with the first's


def test_a_change_in_the_first_play_has_the_second_read_again(tmp_path: Path) -> None:
    (tmp_path / "a.conf").write_text("other\n")
    report = _two_plays(tmp_path, ("a.conf", "alpha"), ("a.conf", "alpha"))
    assert [(r.play, r.status) for r in report.results] == [("first", "changed"), ("second", "ok")]
    assert (tmp_path / "a.conf").read_text() == "other\nalpha\n"
