"""A node that hangs mid-run (every process of the lab node SIGSTOPped: its TCP sockets stay open and the
kernel still ACKs, but nothing answers) is declared unreachable within the inventory's keepalive limits;
the other node of the run finishes, and the recap and ``--json`` are complete."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from gpuhost.lab import manager
from tests.faults.conftest import gpuhost_cmd, gpuhost_env

pytestmark = [pytest.mark.faults, pytest.mark.integration]

KEEPALIVE, COUNT = 1, 2


def tree(init_pid: int) -> list[int]:
    """The lab node's namespace init and every process below it."""
    todo, found = [init_pid], [init_pid]
    while todo:
        pid = todo.pop()
        try:
            for task in Path(f"/proc/{pid}/task").iterdir():
                kids = [int(k) for k in (task / "children").read_text().split()]
                found += kids
                todo += kids
        except OSError:
            continue
    return found


def signal_node(lab, name: str, sig: signal.Signals) -> None:
    entry = next(n for n in manager.status(lab.state_dir).nodes if n["name"] == name)
    for pid in tree(int(entry["init_pid"])):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def setup(lab, tmp_path: Path) -> tuple[Path, Path]:
    yaml = YAML()
    inv = yaml.load(lab.inventory.read_text())
    for node in inv["nodes"].values():
        node["ssh"].update(
            {"keepalive": KEEPALIVE, "keepalive_count": COUNT, "command_timeout": 60, "connect_timeout": 3}
        )
    inventory = lab.inventory.with_name("inventory-frozen.yml")  # beside it: its paths are relative
    with inventory.open("w") as fh:
        yaml.dump(inv, fh)
    book = tmp_path / "play.yml"
    book.write_text(
        """
- hosts: all
  tasks:
    - name: started
      command: {cmd: "touch /root/frozen-test-started"}
    - name: long step
      command: {cmd: "sleep 8; touch /root/frozen-test-done"}
"""
    )
    return book, inventory


def test_frozen_node_is_unreachable_the_other_finishes(fresh_lab, tmp_path):
    lab = fresh_lab(nodes=[("systemd-boot", "amd"), ("grub", "intel")])
    book, inventory = setup(lab, tmp_path)
    lab.run("pve2", "rm -f /root/frozen-test-*")
    start = time.monotonic()
    proc = subprocess.Popen(
        gpuhost_cmd("run", str(book), "-i", str(inventory), "--json"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=gpuhost_env(),
    )
    try:
        deadline = time.monotonic() + 30
        while lab.run("pve2", "test -e /root/frozen-test-started").rc != 0:
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        lab.close()  # the test's own connections would hang on the frozen node too
        signal_node(lab, "pve2", signal.SIGSTOP)
        frozen = time.monotonic()
        out, err = proc.communicate(timeout=60)
        assert out.startswith("{"), out + err
        ended = time.monotonic() - frozen
    finally:
        signal_node(lab, "pve2", signal.SIGCONT)
        if proc.poll() is None:
            proc.kill()
    report = json.loads(out)
    # pve1 ran its 8 s step whole; pve2 was declared lost within its keepalive budget after that
    assert ended < 8 + KEEPALIVE * (COUNT + 2) + 5, (ended, err)
    assert report["hosts"]["pve1"]["failed"] == 0 and report["hosts"]["pve1"]["changed"] == 2
    assert report["hosts"]["pve1"]["unreachable"] is False
    assert report["hosts"]["pve2"]["unreachable"] is True and report["hosts"]["pve2"]["failed"] == 1
    failed = [t for t in report["tasks"] if t["status"] == "failed"]
    assert [(t["host"], t["task"]) for t in failed] == [("pve2", "long step")]
    assert f"no reply to {COUNT} keepalives {KEEPALIVE} s apart" in failed[0]["error"]
    assert proc.returncode == 1, err  # docs/conventions.md: 1 = a host failed or was unreachable
    assert time.monotonic() - start < 60


def test_a_rolling_reboot_stops_at_a_node_that_does_not_come_back(fresh_lab, tmp_path):
    """``serial: 1``: pve2 goes down for its reboot and never comes back (switched off as it boots); the run fails
    pve2 once its reboot timeout is spent and does not reboot pve3."""
    lab = fresh_lab(nodes=[("systemd-boot", "amd"), ("grub", "intel"), ("systemd-boot", "amd")])
    book = tmp_path / "rolling.yml"
    book.write_text(
        "- hosts: all\n  serial: 1\n  tasks:\n    - name: reboot\n      reboot: {reason: kernel update, timeout: 20}\n"
    )
    boots = {n: lab.boots(n) for n in ("pve1", "pve2", "pve3")}
    proc = subprocess.Popen(
        gpuhost_cmd("run", str(book), "-i", str(lab.inventory), "--allow-reboot", "--json"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=gpuhost_env(),
    )
    try:
        deadline = time.monotonic() + 60
        while lab.boots("pve2") == boots["pve2"]:
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        manager.power_node(lab.state_dir, "pve2", on=False)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        manager.power_node(lab.state_dir, "pve2", on=True)
    report = json.loads(out)
    assert report["exit_code"] == 1
    assert {n: lab.boots(n) - boots[n] for n in ("pve1", "pve3")} == {"pve1": 1, "pve3": 0}
    assert report["hosts"]["pve1"]["rebooted"] is True and report["hosts"]["pve3"]["rebooted"] is False
    failed = [(t["host"], t["task"]) for t in report["tasks"] if t["status"] == "failed"]
    assert failed == [("pve2", "reboot")], report["tasks"]
    [stopped] = [t for t in report["tasks"] if t["host"] == "pve3"]
    assert stopped["status"] == "skipped"
    assert stopped["reason"].startswith("not run: batch 2 of 3 failed (pve2: every host of the batch failed)")
    assert "[pve3] reboot:" not in err
