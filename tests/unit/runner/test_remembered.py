"""Reads remembered from run to run (runner/remembered.py): a run records the commands of the facts it read before
its first change, and the next run of the playbook reads them all in one batch when it connects. The results are
always this run's: a file changed by hand between runs is seen and put right."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from gpuhost.inventory.loader import load_inventory
from gpuhost.playbook.loader import load_playbook
from gpuhost.redact import forget_all, register_secret
from gpuhost.runner import remembered
from gpuhost.runner.results import RunReport
from gpuhost.runner.run import RunOptions, run_playbook
from tests.support.local import local_inventory


def _run(
    tmp_path: Path, lines: list[str], *, remember: Path | None, bad: bool = False, tags: frozenset[str] = frozenset()
) -> RunReport:
    tasks = "".join(f"    - line: {{path: {tmp_path}/{name}, line: {text}}}\n" for name, text in lines)
    if bad:
        tasks += "    - command: {cmd: 'false'}\n"
    book = tmp_path / "play.yml"
    book.write_text(f"- name: files\n  hosts: all\n  tasks:\n{tasks}")
    inventory = load_inventory(local_inventory(tmp_path, ["h1"]))
    return run_playbook(load_playbook(book), inventory, RunOptions(forks=1, remember=remember, tags=tags))


def _record(tmp_path: Path, cache: Path) -> Path:
    return remembered.record_path(cache, tmp_path / "play.yml", tmp_path / "inventory.yml", "h1")


def test_the_next_run_reads_what_the_last_read_in_one_batch_and_sees_a_change_made_between(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    for name in ("a.conf", "b.conf"):
        (tmp_path / name).write_text("wanted\n")
    lines = [("a.conf", "wanted"), ("b.conf", "wanted")]
    first = _run(tmp_path, lines, remember=cache)
    assert [r.status for r in first.results] == ["ok", "ok"] and first.hosts["h1"].round_trips == 1
    record = _record(tmp_path, cache)
    doc = json.loads(record.read_text())
    assert len(doc["node"]) == 2 and all(str(tmp_path) in c for c in doc["node"]) and doc["lxc"] == {}
    assert stat.S_IMODE(record.stat().st_mode) == 0o600 and stat.S_IMODE(record.parent.stat().st_mode) == 0o700

    (tmp_path / "b.conf").write_text("changed by hand\n")
    second = _run(tmp_path, lines, remember=cache)
    assert [r.status for r in second.results] == ["ok", "changed"]
    assert (tmp_path / "b.conf").read_text().splitlines() == ["changed by hand", "wanted"]
    # the remembered batch answered both reads; the change then read b.conf again to confirm it
    assert second.hosts["h1"].round_trips >= 2
    third = _run(tmp_path, lines, remember=cache)
    assert [r.status for r in third.results] == ["ok", "ok"] and third.hosts["h1"].round_trips == 1


def test_a_failed_run_keeps_the_last_record_and_an_unreadable_record_means_an_ordinary_run(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    (tmp_path / "a.conf").write_text("wanted\n")
    _run(tmp_path, [("a.conf", "wanted")], remember=cache)
    record = _record(tmp_path, cache)
    before = record.read_text()
    failed = _run(tmp_path, [("a.conf", "wanted")], remember=cache, bad=True)
    assert failed.exit_code == 1 and record.read_text() == before
    nothing = _run(tmp_path, [("a.conf", "wanted")], remember=cache, tags=frozenset({"no-such-tag"}))
    assert nothing.results == [] and record.read_text() == before  # it read nothing: the record stays
    record.write_text("{not json")
    again = _run(tmp_path, [("a.conf", "wanted")], remember=cache)
    assert [r.status for r in again.results] == ["ok"] and again.hosts["h1"].round_trips == 1
    assert json.loads(record.read_text())["node"] == json.loads(before)["node"]  # written again, whole


def test_a_command_showing_a_secret_is_not_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    secret_dir = tmp_path / "s3cr3t-t0ken-value"
    secret_dir.mkdir()
    (secret_dir / "a.conf").write_text("wanted\n")
    (tmp_path / "b.conf").write_text("wanted\n")
    register_secret("s3cr3t-t0ken-value")
    try:
        _run(tmp_path, [("s3cr3t-t0ken-value/a.conf", "wanted"), ("b.conf", "wanted")], remember=cache)
    finally:
        forget_all()
    text = _record(tmp_path, cache).read_text()
    assert "s3cr3t-t0ken-value" not in text and "b.conf" in text


def test_without_a_record_directory_nothing_is_written(tmp_path: Path) -> None:
    (tmp_path / "a.conf").write_text("wanted\n")
    report = _run(tmp_path, [("a.conf", "wanted")], remember=None)
    assert [r.status for r in report.results] == ["ok"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.conf", "inventory.yml", "play.yml"]


def test_what_the_last_run_read_alone_first_finishes_before_the_other_remembered_reads_start(tmp_path: Path) -> None:
    """The node's facts a role is expanded from were read alone, before any batch (they wait for the boot to
    finish): remembered, they still finish before the others start, in the same one command."""
    from gpuhost.core.facts import Fact
    from gpuhost.core.result import CommandResult
    from tests.support.local import local_host

    mark = tmp_path / "booted"
    slow_first = f"sleep 0.3; touch {mark}; echo first"
    sees_mark = f"test -e {mark} && echo seen || echo not-yet"
    ran = Fact("run", lambda cmd: cmd, lambda result, cmd: result.stdout.strip())

    # what a run records: the direct read before any batch is "first", the batched one is not
    last = local_host()
    assert last.fact(ran, "echo alone") == "alone"
    last.begin_batches()
    last.store_result((ran, "echo batched"), CommandResult("echo batched", 0, "batched\n", ""))
    assert last.fact(ran, "echo batched") == "batched"
    assert last.fact(ran, "echo later") == "later"  # read alone, but after the batches began
    assert last.asked() == (["echo alone", "echo batched", "echo later"], ["echo alone"])

    ctx = local_host()
    remembered.read(ctx, remembered.Record(node=[sees_mark, slow_first], first=[slow_first]))
    assert ctx.total_round_trips() == 1
    assert ctx.fact(ran, slow_first) == "first" and ctx.fact(ran, sees_mark) == "seen"
    assert ctx.total_round_trips() == 1  # both answered by the one remembered read
    assert ctx.fact(ran, "echo other") == "other" and ctx.total_round_trips() == 2  # not remembered: read as ever

    mark.unlink()
    together = local_host()  # nothing was read alone: all at once
    remembered.read(together, remembered.Record(node=[sees_mark, slow_first]))
    assert together.fact(ran, sees_mark) == "not-yet"


def test_a_record_others_could_write_is_not_read(tmp_path: Path) -> None:
    """Its commands run as the node's user: a record (or its folder) writable by others, or owned by another user,
    is treated as no record, as OpenSSH treats such a config file."""
    cache = tmp_path / "cache"
    (tmp_path / "a.conf").write_text("wanted\n")
    _run(tmp_path, [("a.conf", "wanted")], remember=cache)
    record = _record(tmp_path, cache)
    assert remembered.load(record).node  # as written: owner only
    record.chmod(0o622)
    assert remembered.load(record) == remembered.Record()
    record.chmod(0o600)
    record.parent.chmod(0o777)
    assert remembered.load(record) == remembered.Record()
    record.parent.chmod(0o700)
    assert remembered.load(record).node


def test_a_converged_run_leaves_its_unchanged_record_alone_and_a_new_read_rewrites_it(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    (tmp_path / "a.conf").write_text("wanted\n")
    (tmp_path / "b.conf").write_text("wanted\n")
    _run(tmp_path, [("a.conf", "wanted")], remember=cache)
    record = _record(tmp_path, cache)
    before = record.stat()
    _run(tmp_path, [("a.conf", "wanted")], remember=cache)
    after = record.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    _run(tmp_path, [("a.conf", "wanted"), ("b.conf", "wanted")], remember=cache)  # one read more: recorded
    assert len(json.loads(record.read_text())["node"]) == 2
