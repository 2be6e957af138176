"""A rolling ``provision host --serial 1 --allow-reboot`` on a 3-node lab PVE cluster with an HA container.

The lab's cluster (gpuhost.lab.cluster) keeps corosync's quorum and the HA stack as PVE's own code does: an HA
resource moves off a node in maintenance and back once maintenance is disabled; quorum counts the running
members. What the operator sees: each node reboots in turn (batch N of 3), the HA container is moved away before
its node goes down and is back on its node at the end, the cluster stays quorate, and a second run changes
nothing. A cluster missing a node refuses a reboot that would lose quorum.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuhost.lab import manager
from gpuhost.lab.spec import NodeSpec
from tests.lab_fixtures import LabHandle, lab_address, start_lab

TEMPLATE = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"
NODES = ["clu1", "clu2", "clu3"]
REPO = Path(__file__).resolve().parents[3]


def gpuhost(*args: str, timeout: float = 500) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    return subprocess.run(
        [sys.executable, "-m", "gpuhost", *args],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(REPO / "src")},
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabHandle]:
    state = tmp_path_factory.mktemp("clusterlab") / "state"
    specs = [
        NodeSpec(n, lab_address(7, i), boot="grub", cpu="intel", pve=8, cluster="lab")
        for i, n in enumerate(NODES, start=1)
    ]
    handle = start_lab(state, specs)
    yield handle
    handle.close()
    manager.down(state)


def ha_services(lab: LabHandle, node: str) -> list[str]:
    out = lab.run(node, "ha-manager status").stdout
    return [line for line in out.splitlines() if line.startswith("service ")]


def wait_for(what, timeout: float = 60.0):  # noqa: ANN001, ANN201
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.3)


def test_pvecm_and_ha_manager_answer_as_a_three_node_cluster(cluster: LabHandle) -> None:
    r = cluster.run("clu2", "pvecm status")
    assert r.rc == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:6] == [
        "Cluster information",
        "-------------------",
        "Name:             lab",
        "Config Version:   3",
        "Transport:        knet",
        "Secure auth:      on",
    ]
    assert "Quorate:          Yes" in lines and "Expected votes:   3" in lines and "Total votes:      3" in lines
    assert "Quorum:           2  " in lines and "Flags:            Quorate " in lines
    assert lines[-3:] == [
        f"0x00000001          1 {cluster.node('clu1').address}",
        f"0x00000002          1 {cluster.node('clu2').address} (local)",
        f"0x00000003          1 {cluster.node('clu3').address}",
    ]
    assert cluster.run("clu1", "ha-manager status").stdout == "quorum OK\n"  # no HA resource yet


def test_rolling_provision_moves_the_ha_guest_keeps_quorum_and_converges(cluster: LabHandle) -> None:
    lab = cluster
    r = lab.run("clu1", f"pct create 820 {TEMPLATE} --hostname ha-web --memory 512 --rootfs local-lvm:4 --start 1")
    assert r.rc == 0, r.stderr
    assert lab.run("clu1", "ha-manager add ct:820").rc == 0
    assert wait_for(lambda: ha_services(lab, "clu3") == ["service ct:820 (clu1, started)"]), ha_services(lab, "clu3")
    boots = {n: lab.boots(n) for n in NODES}

    args = ("provision", "host", "-i", str(lab.inventory), "-e", "gpu_path=none", "--serial", "1", "--allow-reboot")
    r = gpuhost(*args, "--json")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    report = json.loads(r.stdout)
    assert {n: lab.boots(n) - boots[n] for n in NODES} == {n: 1 for n in NODES}
    assert all(report["hosts"][n]["rebooted"] for n in NODES)
    progress = r.stderr.splitlines()
    # one node at a time, in order
    batches = [line for line in progress if "serial: batch" in line]
    assert batches == [f"[{n}] serial: batch {i} of 3" for i, n in enumerate(NODES, start=1)]
    going_down = [line.split("]")[0][1:] for line in progress if line.endswith("reboot: going down (0 s)")]
    assert going_down == NODES
    # clu1 held the HA container: maintenance first, the reboot only once the HA stack had moved it away
    mine = [line for line in progress if line.startswith("[clu1] reboot:")]
    enabled = mine.index(
        "[clu1] reboot: HA maintenance enabled for clu1; waiting for the HA stack to move ct:820 (started) away"
    )
    moved = next(i for i, line in enumerate(mine) if line.startswith("[clu1] reboot: HA resources moved off clu1"))
    assert enabled < moved < mine.index("[clu1] reboot: going down (0 s)")
    assert "[clu1] reboot: HA maintenance disabled for clu1" in mine
    # quorum held: every reboot passed the quorum check, and all three are members again
    assert not [line for line in r.stdout.splitlines() if "quorum" in line.lower()]
    pvecm = lab.run("clu3", "pvecm status").stdout.splitlines()
    assert "Quorate:          Yes" in pvecm and "Total votes:      3" in pvecm
    # the HA stack brings the container back to its node (maintenance fallback) and it runs there
    assert wait_for(lambda: ha_services(lab, "clu2") == ["service ct:820 (clu1, started)"]), ha_services(lab, "clu2")
    assert lab.run("clu1", "pct status 820").stdout.strip() == "status: running"
    assert "820" not in lab.run("clu2", "pct list").stdout + lab.run("clu3", "pct list").stdout

    again = gpuhost(*args, "--json")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    second = json.loads(again.stdout)
    assert {n: (second["hosts"][n]["changed"], second["hosts"][n]["rebooted"]) for n in NODES} == {
        n: (0, False) for n in NODES
    }
    assert {n: lab.boots(n) - boots[n] for n in NODES} == {n: 1 for n in NODES}


def test_a_reboot_that_would_lose_quorum_is_refused(cluster: LabHandle, tmp_path: Path) -> None:
    lab = cluster
    book = tmp_path / "reboot.yml"
    book.write_text("- hosts: clu1\n  tasks:\n    - name: reboot\n      reboot: {reason: kernel update}\n")
    manager.power_node(lab.state_dir, "clu3", on=False)
    try:
        assert wait_for(lambda: "Total votes:      2" in lab.run("clu1", "pvecm status").stdout)
        before = lab.boots("clu1")
        r = gpuhost("run", str(book), "-i", str(lab.inventory), "--allow-reboot")
        assert r.returncode == 1
        assert (
            "clu1: rebooting it would lose the cluster's quorum (2 of 3 expected votes present, 1 of them this "
            "node's, 2 needed); bring the other nodes up first"
        ) in r.stdout, r.stdout
        assert lab.boots("clu1") == before
    finally:
        manager.power_node(lab.state_dir, "clu3", on=True)
