"""Introspection on lab nodes: ``gpuhost facts`` for a group and for all, with each node's guests."""

from __future__ import annotations

import json

from tests.lab_fixtures import LabHandle, gpuhost_cli

TEMPLATE = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"


def test_facts_of_all_nodes_list_their_guests(lab: LabHandle) -> None:
    r = lab.run("pve3", f"pct create 731 {TEMPLATE} --hostname facts-ct --memory 512 --rootfs local-lvm:4")
    assert r.rc == 0, r.stderr
    try:
        out = gpuhost_cli(lab.inventory, "facts", "all", "--json", timeout=300)
        assert out.returncode == 0, out.stdout + out.stderr
        hosts = json.loads(out.stdout)["hosts"]
        assert sorted(hosts) == ["pve1", "pve2", "pve3"]
        assert "CT 731 facts-ct stopped" in hosts["pve3"]["guests"]
        assert all("CT 731" not in g for g in hosts["pve1"]["guests"])
        # what pct list says on the node is what facts shows
        listed = lab.run("pve3", "pct list").stdout
        assert "731" in listed and "facts-ct" in listed
        one = gpuhost_cli(lab.inventory, "facts", "pve3", timeout=300)
        assert one.returncode == 0 and "CT 731 facts-ct stopped" in one.stdout, one.stdout + one.stderr
    finally:
        lab.run("pve3", "pct destroy 731")
