"""``gpuhost shell --ctid N``: the command runs inside the container on each lab node, not on the node."""

from __future__ import annotations

from tests.integration.test_operator_output import gpuhost
from tests.lab_fixtures import LabHandle

TEMPLATE = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"


def test_shell_ctid_runs_inside_the_container(lab: LabHandle) -> None:
    ctid = 731
    r = lab.run("pve2", f"pct create {ctid} {TEMPLATE} --hostname ct{ctid} --memory 512 --rootfs local-lvm:4")
    assert r.rc == 0, r.stderr
    assert lab.run("pve2", f"pct start {ctid}").rc == 0
    r = gpuhost(
        "shell",
        "pve2",
        "-i",
        str(lab.inventory),
        "--ctid",
        str(ctid),
        "--",
        "hostname; test -e /etc/pve || echo no-pve",
    )
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("pve2 | ok | rc=0") and lines[1:3] == [f"  ct{ctid}", "  no-pve"], r.stdout
    on_node = gpuhost("shell", "pve2", "-i", str(lab.inventory), "--", "hostname")
    assert "  pve2" in on_node.stdout.splitlines()
