"""The lab's ``pvecm status`` and ``ha-manager status`` against real captures (tests/fixtures/cluster/, SOURCE.md):
given the captured cluster's state, the lab prints the capture byte for byte (the clock set to the capture's)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuhost.lab.cluster import ClusterMember, corosync_conf
from gpuhost.lab.node.cli import ha_manager, pvecm

CLUSTER = Path(__file__).resolve().parents[2] / "fixtures" / "cluster"


def test_pvecm_status_of_myclust_from_pve03_is_the_capture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pve9-3node-myclust-pve03.txt: 3 nodes "myclust", config version 3, pve03 local (node id 3), Ring ID 1.20c."""
    members = [ClusterMember(f"pve0{i}", i, f"192.168.18.13{i}") for i in (1, 2, 3)]
    conf = tmp_path / "corosync.conf"
    conf.write_text(corosync_conf("myclust", members))  # config_version: 3, one per node that joined
    monkeypatch.setattr(pvecm, "COROSYNC_CONF", str(conf))
    answer = {
        "cluster_name": "myclust",
        "members": [{"name": m.name, "nodeid": m.nodeid, "address": m.address, "votes": 1} for m in members],
        "expected_votes": 3,
        "total_votes": 3,
        "quorum": 2,
        "quorate": True,
        "local": "pve03",
    }
    monkeypatch.setattr(pvecm, "ask_json", lambda request: answer)
    monkeypatch.setattr(pvecm.time, "ctime", lambda: "Wed Dec 24 02:20:02 2025")
    monkeypatch.setattr(pvecm.time, "time", lambda: 0x20C)
    assert pvecm.status() == (CLUSTER / "pvecm-status" / "pve9-3node-myclust-pve03.txt").read_text()


def test_ha_manager_status_of_myclust_is_the_capture_but_for_its_times(monkeypatch: pytest.MonkeyPatch) -> None:
    """pve9-myclust-from-pve03.txt: master pve02, three active LRMs, five started VMs (each line's time is when that
    daemon last wrote its status; the lab writes one time)."""
    answer = {
        "quorate": True,
        "master": "pve02",
        "lrm": {"pve01": "active", "pve02": "active", "pve03": "active"},
        "services": [
            {"sid": sid, "node": node, "state": "started"}
            for sid, node in (
                ("vm:100", "pve03"),
                ("vm:101", "pve01"),
                ("vm:102", "pve02"),
                ("vm:104", "pve03"),
                ("vm:105", "pve01"),
            )
        ],
    }
    monkeypatch.setattr(ha_manager, "ask_json", lambda request: answer)
    monkeypatch.setattr(ha_manager.time, "ctime", lambda: "Wed Dec 24 02:22:06 2025")
    capture = (CLUSTER / "ha-manager-status" / "pve9-myclust-from-pve03.txt").read_text()
    times = re.compile(r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}")
    assert times.sub("TIME", ha_manager.status()) == times.sub("TIME", capture)
