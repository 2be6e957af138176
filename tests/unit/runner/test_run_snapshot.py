"""The state a run reads at its end for a caller (the provision commands' ``--drift`` baseline): read ahead with the
first batch, so a run that changes nothing pays no round trip for it; read again after a change, so it is the
state the run left; not read in check mode or after a failure."""

from __future__ import annotations

from pathlib import Path

from gpuhost.core.facts import Fact
from gpuhost.inventory.loader import load_inventory
from gpuhost.playbook.loader import load_playbook
from gpuhost.runner.run import RunOptions, run_playbook
from tests.support.local import local_inventory


def _setup(tmp_path: Path, failing: bool = False) -> tuple[Path, Path, Fact[str]]:
    d = tmp_path / "etc"
    d.mkdir()
    reads = tmp_path / "reads.log"
    fact: Fact[str] = Fact(
        "test snapshot",
        lambda: f"echo read >> {reads}; cat {d}/a 2>/dev/null; true",
        lambda r, *_a: r.stdout.strip(),
    )
    tasks = f"    - line: {{path: {d}/a, line: one, create: true}}\n"
    if failing:
        tasks += "    - command: 'false'\n"
    book = tmp_path / "play.yml"
    book.write_text(f"- hosts: all\n  tasks:\n{tasks}")
    return book, reads, fact


def _run(tmp_path: Path, book: Path, fact: Fact[str], check: bool = False):  # noqa: ANN202
    inv = load_inventory(local_inventory(tmp_path, ["h1"]))
    return run_playbook(load_playbook(book), inv, RunOptions(check=check, snapshot=lambda _name: (fact,)))


def test_a_change_reads_the_state_again_at_the_end_and_a_converged_run_reads_it_once(tmp_path: Path) -> None:
    book, reads, fact = _setup(tmp_path)
    first = _run(tmp_path, book, fact)
    assert first.exit_code == 0 and first.hosts["h1"].changed == 1
    assert first.hosts["h1"].snapshot == "one"  # after the change, not the empty file before it
    assert reads.read_text() == "read\nread\n"  # ahead (before the change), then again at the end
    reads.unlink()
    again = _run(tmp_path, book, fact)
    assert again.hosts["h1"].changed == 0 and again.hosts["h1"].snapshot == "one"
    assert reads.read_text() == "read\n"  # the read-ahead only


def test_no_snapshot_in_check_mode_or_after_a_failed_task(tmp_path: Path) -> None:
    book, reads, fact = _setup(tmp_path, failing=True)
    failed = _run(tmp_path, book, fact)
    assert failed.exit_code != 0 and failed.hosts["h1"].snapshot is None
    reads.unlink(missing_ok=True)
    checked = _run(tmp_path, book, fact, check=True)
    assert checked.hosts["h1"].snapshot is None and not reads.exists()  # not even read ahead
    assert "snapshot" not in failed.hosts["h1"].to_json()
