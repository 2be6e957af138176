"""A rolling run (``serial``) stops after a failed batch, as Ansible does; ``--max-fail-percentage`` lowers the bar;
each batch is announced ("batch 1 of 3"); ``--reboot-serving`` and ``--limit`` are checked before anything runs."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gpuhost.errors import InventoryError, UsageError
from gpuhost.inventory.loader import load_inventory
from gpuhost.playbook.loader import load_playbook
from gpuhost.runner.run import RunOptions, run_playbook
from gpuhost.runner.serial import batch_stops
from tests.support.local import local_inventory

HOSTS = ["h1", "h2", "h3", "h4"]


def rolling(tmp_path: Path, bad: set[str], serial: int) -> Path:
    """Each host touches a marker per task; hosts in ``bad`` fail the first task."""
    for name in bad:
        (tmp_path / f"{name}.bad").write_text("")
    book = tmp_path / "rolling.yml"
    book.write_text(
        f"""
- hosts: all
  serial: {serial}
  tasks:
    - name: pin the driver
      command: {{cmd: "test ! -e {tmp_path}/{{{{ inventory_hostname }}}}.bad && touch {tmp_path}/{{{{ inventory_hostname }}}}.ran"}}
"""
    )
    return book


def ran(tmp_path: Path) -> list[str]:
    return sorted(p.stem for p in tmp_path.glob("*.ran"))


def test_with_serial_one_a_failed_host_stops_the_run_before_the_next_batch(tmp_path: Path, caplog) -> None:
    inv = load_inventory(local_inventory(tmp_path, HOSTS))
    with caplog.at_level(logging.INFO, logger="gpuhost.progress"):
        report = run_playbook(load_playbook(rolling(tmp_path, {"h1"}, 1)), inv)
    assert report.exit_code == 1
    assert ran(tmp_path) == []  # h2, h3, h4 never ran the task that failed on h1
    assert report.hosts["h1"].failed == 1
    stopped = [r for r in report.results if r.task == "rolling run stopped"]
    assert [r.host for r in stopped] == ["h2", "h3", "h4"]
    assert stopped[0].status == "skipped"
    assert stopped[0].reason == (
        "not run: batch 1 of 4 failed (h1: every host of the batch failed); a rolling run stops after a failed batch"
    )
    said = [(r.host, r.getMessage()) for r in caplog.records]  # type: ignore[attr-defined]
    # the batches announced (each task's own live line aside): only the first, which failed
    assert [s for s in said if s[1].startswith("serial:")] == [("h1", "serial: batch 1 of 4")]


def test_a_batch_that_only_partly_failed_goes_on_as_in_ansible(tmp_path: Path) -> None:
    inv = load_inventory(local_inventory(tmp_path, HOSTS))
    report = run_playbook(load_playbook(rolling(tmp_path, {"h1"}, 2)), inv)
    assert report.exit_code == 1
    assert ran(tmp_path) == ["h2", "h3", "h4"]


def test_max_fail_percentage_stops_a_partly_failed_batch(tmp_path: Path) -> None:
    inv = load_inventory(local_inventory(tmp_path, HOSTS))
    report = run_playbook(load_playbook(rolling(tmp_path, {"h1"}, 2)), inv, RunOptions(max_fail_percentage=49))
    assert ran(tmp_path) == ["h2"]  # h2 was in h1's batch; h3 and h4 did not run
    assert [r.host for r in report.results if r.task == "rolling run stopped"] == ["h3", "h4"]


def test_max_fail_percentage_must_be_exceeded_not_equalled(tmp_path: Path) -> None:
    inv = load_inventory(local_inventory(tmp_path, HOSTS))
    run_playbook(load_playbook(rolling(tmp_path, {"h1"}, 2)), inv, RunOptions(max_fail_percentage=50))
    assert ran(tmp_path) == ["h2", "h3", "h4"]


def test_batch_stops() -> None:
    assert batch_stops(1, 0, None) is None
    assert batch_stops(1, 1, None) == "every host of the batch failed"
    assert batch_stops(3, 1, None) is None
    assert batch_stops(3, 1, 0) == "1 of 3 failed, more than --max-fail-percentage 0"
    assert batch_stops(3, 1, 33) == "1 of 3 failed, more than --max-fail-percentage 33"
    assert batch_stops(3, 1, 34) is None


def test_reboot_serving_must_name_a_node_of_the_run(tmp_path: Path) -> None:
    inv = load_inventory(local_inventory(tmp_path, HOSTS))
    book = load_playbook(rolling(tmp_path, set(), 1))
    with pytest.raises(UsageError) as err:
        run_playbook(book, inv, RunOptions(reboot_serving=frozenset({"ghost"}), limit="h1,h2"))
    assert err.value.exit_code == 2
    assert str(err.value) == (
        "--reboot-serving ghost: not a node this run works on (its nodes: h1, h2); name a node of the inventory "
        "that the playbook and --limit select"
    )
    assert ran(tmp_path) == []


@pytest.mark.parametrize("limit", ["", " ", ",", " , ", "!"])
def test_a_limit_that_names_nothing_selects_nothing(tmp_path: Path, limit: str) -> None:
    inv = load_inventory(local_inventory(tmp_path, HOSTS))
    with pytest.raises(InventoryError) as err:
        run_playbook(load_playbook(rolling(tmp_path, set(), 1)), inv, RunOptions(limit=limit))
    assert err.value.exit_code == 2
    assert f"the pattern {limit!r} names no node or group" in str(err.value)
    assert ran(tmp_path) == []


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--limit", ","], "--limit ',': "),
        (["--limit", ""], "--limit '': "),
        (
            ["--reboot-serving", "ghost"],
            "--reboot-serving ghost: not a node this run works on (its nodes: h1, h2, h3, h4)",
        ),
    ],
)
def test_the_command_line_refuses_with_exit_2_and_runs_nothing(tmp_path: Path, flags: list[str], message: str) -> None:
    import subprocess
    import sys

    inv = local_inventory(tmp_path, HOSTS)
    book = rolling(tmp_path, set(), 1)
    r = subprocess.run(
        [sys.executable, "-m", "gpuhost", "run", str(book), "-i", str(inv), *flags], capture_output=True, text=True
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr
    assert ran(tmp_path) == []
