"""The lab cluster's CRM and votequorum (gpuhost.lab.cluster) without nodes: the rules as pve-ha-manager's
Manager.pm and corosync's votequorum state them, read off their sources (cited in the module)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gpuhost.lab.cluster import Cluster, ClusterMember


def make(tmp_path: Path, up: set[str], resources: str) -> tuple[Cluster, list[tuple[str, list[str]]]]:
    ran: list[tuple[str, list[str]]] = []
    pmx = tmp_path / "pmxcfs"
    for n in ("n1", "n2", "n3"):
        (pmx / "nodes" / n / "lxc").mkdir(parents=True)
        (tmp_path / "disk" / n).mkdir(parents=True)
    (pmx / "ha").mkdir()
    (pmx / "ha" / "resources.cfg").write_text(resources)

    def shell(node: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
        ran.append((node, argv))
        return subprocess.CompletedProcess(argv, 0, "", "")

    cluster = Cluster(
        name="lab",
        members=[ClusterMember(n, i, f"127.0.0.{i}") for i, n in enumerate(("n1", "n2", "n3"), start=1)],
        pmxcfs=pmx,
        online=lambda n: n in up,
        shell=shell,
        disk_dir=lambda n: tmp_path / "disk" / n,
    )
    return cluster, ran


def settle(cluster: Cluster) -> None:
    for _ in range(10):
        cluster.tick()
        if cluster._moving is not None:
            cluster._moving.join(5)


def test_quorum_is_a_majority_of_the_nodelist(tmp_path: Path) -> None:
    cluster, _ = make(tmp_path, {"n1", "n2"}, "")
    q = cluster.quorum()
    assert (q["expected_votes"], q["total_votes"], q["quorum"], q["quorate"]) == (3, 2, 2, True)
    cluster, _ = make(tmp_path / "b", {"n1"}, "")
    assert cluster.quorum()["quorate"] is False


def test_maintenance_moves_a_container_to_the_least_loaded_node_and_back(tmp_path: Path) -> None:
    cluster, ran = make(tmp_path, {"n1", "n2", "n3"}, "ct: 820\n\tstate started\n\nct: 821\n\tstate started\n\n")
    (cluster.pmxcfs / "nodes" / "n1" / "lxc" / "820.conf").write_text("hostname: a\n")
    (cluster.pmxcfs / "nodes" / "n2" / "lxc" / "821.conf").write_text("hostname: b\n")
    (tmp_path / "disk" / "n1" / "ct" / "820").mkdir(parents=True)
    settle(cluster)
    assert cluster.crm_command(["node-maintenance", "enable", "n1"]) == "ok"
    settle(cluster)
    # n2 holds 821, n3 nothing: n3 scores lowest (PVE::HA::Usage::Basic counts the node's resources)
    assert [(s["sid"], s["node"], s["state"]) for s in cluster.ha_status()["services"]] == [
        ("ct:820", "n3", "started"),
        ("ct:821", "n2", "started"),
    ]
    assert cluster.ha_status()["lrm"]["n1"] == "maintenance mode"
    assert (cluster.pmxcfs / "nodes" / "n3" / "lxc" / "820.conf").exists()
    assert (tmp_path / "disk" / "n3" / "ct" / "820").is_dir()
    assert ran == [("n1", ["pct", "stop", "820"]), ("n3", ["pct", "start", "820"])]
    cluster.crm_command(["node-maintenance", "disable", "n1"])
    settle(cluster)
    assert cluster.ha_status()["services"][0] == {"sid": "ct:820", "node": "n1", "state": "started"}
    assert "moving service 'ct:820' back to 'n1', node came back from maintenance." in cluster.log


def test_a_disarmed_stack_ignores_maintenance_and_shows_ignore(tmp_path: Path) -> None:
    cluster, ran = make(tmp_path, {"n1", "n2", "n3"}, "vm: 100\n\tstate started\n\n")
    (cluster.pmxcfs / "nodes" / "n1" / "qemu-server").mkdir()
    (cluster.pmxcfs / "nodes" / "n1" / "qemu-server" / "100.conf").write_text("name: v\n")
    settle(cluster)
    cluster.crm_command(["disarm-ha", "ignore"])
    cluster.crm_command(["node-maintenance", "enable", "n1"])
    settle(cluster)
    assert cluster.ha_status()["services"] == [{"sid": "vm:100", "node": "n1", "state": "ignore"}]
    assert ran == []
    assert "ignoring maintenance command for node n1 - HA stack is disarmed" in cluster.log
