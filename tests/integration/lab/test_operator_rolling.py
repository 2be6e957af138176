"""A rolling reboot across three lab nodes: ``serial: 1`` reboots one node at a time, each node's
running guests are listed before it goes down, and the reboot's phases are shown while waiting.

These nodes are standalone; a cluster's quorum and HA steps run end to end in test_cluster_rolling.py (the
lab's 3-node cluster) and on real ``pvecm status``/``ha-manager status`` captures in
tests/unit/pve/test_reboot_guard.py (tests/fixtures/cluster/)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from gpuhost.lab import manager
from gpuhost.lab.spec import NodeSpec
from tests.integration.test_operator_output import gpuhost
from tests.lab_fixtures import LabHandle, lab_address, start_lab

TEMPLATE = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"
NODES = ["roll1", "roll2", "roll3"]


@pytest.fixture(scope="module")
def roll_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabHandle]:
    """Its own nodes: this test reboots them."""
    state = tmp_path_factory.mktemp("rolllab") / "state"
    handle = start_lab(state, [NodeSpec(n, lab_address(17, i), pve=8) for i, n in enumerate(NODES, start=1)])
    yield handle
    handle.close()
    manager.down(state)


def test_serial_one_reboots_one_node_at_a_time_and_lists_its_guests(roll_lab: LabHandle, tmp_path) -> None:
    lab = roll_lab
    for i, node in enumerate(NODES):
        ctid = 810 + i
        r = lab.run(node, f"pct create {ctid} {TEMPLATE} --hostname web{i} --memory 512 --rootfs local-lvm:4")
        assert r.rc == 0, r.stderr
        assert lab.run(node, f"pct start {ctid}").rc == 0
    boots = {n: lab.boots(n) for n in NODES}
    book = tmp_path / "rolling.yml"
    book.write_text(
        "- name: rolling reboot\n  hosts: all\n  serial: 1\n  tasks:\n"
        "    - name: before\n      command: {cmd: 'true'}\n"
        "    - name: reboot\n      reboot: {reason: kernel update}\n"
        "    - name: after\n      command: {cmd: 'true'}\n"
    )
    r = gpuhost("run", str(book), "-i", str(lab.inventory), "--json-events", "--allow-reboot")
    assert r.returncode == 0, r.stdout + r.stderr
    tasks = [(e["host"], e["task"]) for e in map(json.loads, r.stdout.splitlines()) if e["event"] == "task"]
    assert tasks == [(n, t) for n in NODES for t in ("before", "reboot", "after")], tasks
    assert {n: lab.boots(n) for n in NODES} == {n: boots[n] + 1 for n in NODES}
    progress = [line for line in r.stderr.splitlines() if line.startswith("[roll")]
    for i, node in enumerate(NODES):
        listed = f"[{node}] reboot: guests that go down with the node: CT {810 + i} (web{i})"
        assert listed in progress, r.stderr
        mine = [line for line in progress if line.startswith(f"[{node}] ")]
        assert mine[0] == f"[{node}] serial: batch {i + 1} of 3"  # each batch announced as it starts
        assert mine[1] == listed and mine[-1].startswith(f"[{node}] reboot: up (systemd finished starting)")
        assert any("back on SSH" in line for line in mine)
    # without serial the three reboots overlap: all three nodes start before any finishes
    r = gpuhost("run", str(book), "-i", str(lab.inventory), "--json-events", "--allow-reboot", "--serial", "3")
    assert r.returncode == 0, r.stderr
    tasks = [(e["host"], e["task"]) for e in map(json.loads, r.stdout.splitlines()) if e["event"] == "task"]
    assert {h for h, t in tasks[:3] if t == "before"} == set(NODES), tasks


def test_a_node_that_serves_a_model_is_not_rebooted_unless_named(roll_lab: LabHandle, tmp_path) -> None:
    lab = roll_lab
    node = "roll2"
    r = lab.run(
        node, "nohup bash -c 'exec -a \"python3 -m sglang.launch_server --model-path glm\" sleep 300' >/dev/null 2>&1 &"
    )
    assert r.rc == 0, r.stderr
    before = lab.boots(node)
    book = tmp_path / "reboot.yml"
    book.write_text(f"- hosts: {node}\n  tasks:\n    - name: reboot\n      reboot: {{}}\n")
    r = gpuhost("run", str(book), "-i", str(lab.inventory), "--allow-reboot")
    assert r.returncode == 1
    assert f"{node} serves a model" in r.stdout and f"--reboot-serving {node}" in r.stdout, r.stdout
    assert lab.boots(node) == before
    r = gpuhost("run", str(book), "-i", str(lab.inventory), "--allow-reboot", "--reboot-serving", node)
    assert r.returncode == 0, r.stdout + r.stderr
    assert lab.boots(node) == before + 1
