"""Before a node reboots: guests listed, quorum kept, HA maintenance around it, serving nodes guarded.

The texts below follow the output of PVE 8's ``pvecm status``, ``ha-manager status``, ``pct list`` and
``qm list`` (the lab simulates single nodes, not a corosync cluster, so these steps are tested here).
"""

from __future__ import annotations

import pytest

from gpuhost.connection.local import LocalConnection
from gpuhost.core.result import CommandResult
from gpuhost.errors import OperationFailed
from gpuhost.runner.rolling import (
    after_reboot,
    batches,
    before_reboot,
    ha_services_on,
    parse_pct_list,
    parse_pvecm_status,
    parse_qm_list,
)

PVECM_3 = """Cluster information
-------------------
Name:             prod
Config Version:   3
Transport:        knet
Secure auth:      on

Quorum information
------------------
Date:             Tue Dec  1 09:00:00 2026
Quorum provider:  corosync_votequorum
Nodes:            {nodes}
Node ID:          0x00000001
Ring ID:          1.2c
Quorate:          Yes

Votequorum information
----------------------
Expected votes:   3
Highest expected: 3
Total votes:      {votes}
Quorum:           2{flag}
Flags:            Quorate

Membership information
----------------------
    Nodeid      Votes Name
0x00000001          1 192.0.2.11 (local)
0x00000002          1 192.0.2.12
{third}"""

HA = """quorum OK
master pve2 (active, Tue Dec  1 09:00:01 2026)
lrm pve1 (active, Tue Dec  1 09:00:02 2026)
lrm pve2 (idle, Tue Dec  1 09:00:03 2026)
service ct:200 (pve1, started)
service vm:100 (pve2, started)
"""

PCT = "VMID       Status     Lock         Name\n200        running                 glm5\n201        stopped                 spare\n"
QM = (
    "      VMID NAME                 STATUS     MEM(MB)    BOOTDISK(GB) PID\n"
    "       100 win-desk             running    8192              64.00 4242\n"
    "       101 old                  stopped    2048              32.00 0\n"
)


def pvecm(nodes: int = 3, votes: int = 3) -> str:
    third = "0x00000003          1 192.0.2.13\n" if nodes == 3 else ""
    return PVECM_3.format(nodes=nodes, votes=votes, flag="  " if nodes == 3 else "", third=third)


def test_batches():
    assert batches(["a", "b", "c"], 1) == [["a"], ["b"], ["c"]]
    assert batches(["a", "b", "c"], 2) == [["a", "b"], ["c"]]
    assert batches(["a", "b", "c"], None) == [["a", "b", "c"]]
    assert batches([], 1) == []


def test_parsers():
    assert [str(g) for g in parse_pct_list(PCT)] == ["CT 200 (glm5)"]
    assert [str(g) for g in parse_qm_list(QM)] == ["VM 100 (win-desk)"]
    q = parse_pvecm_status(pvecm())
    assert (q.nodes, q.total_votes, q.quorum, q.quorate, q.local_votes) == (3, 3, 2, True, 1)
    assert ha_services_on(HA, "pve1") == ["ct:200"] and ha_services_on(HA, "pve3") == []


class Scripted(LocalConnection):
    """Answers each command from a table (what the node would print); records what ran."""

    def __init__(self, answers: dict[str, tuple[int, str]]) -> None:
        super().__init__("pve1")
        self.answers, self.ran = answers, []

    def _exec(self, command, stdin, timeout, stdout_sink=None):  # noqa: ANN001
        self.ran.append(command)
        for prefix, (rc, out) in self.answers.items():
            if command.startswith(prefix):
                return CommandResult(command, rc, out, "")
        return CommandResult(command, 0, "", "")


def cluster(pvecm_text: str, ha: str = HA, serving: str = "") -> Scripted:
    return Scripted(
        {
            "command -v pct": (0, PCT),
            "command -v qm": (0, QM),
            "pgrep": (0, serving),
            "test -e /etc/pve/corosync.conf": (0, ""),
            "pvecm status": (0, pvecm_text),
            "hostname": (0, "pve1\n"),
            "ha-manager status": (0, ha),
        }
    )


def test_cluster_node_with_ha_resources_goes_into_maintenance_and_back(caplog):
    conn = cluster(pvecm())
    with caplog.at_level("INFO", logger="gpuhost.progress"):
        guard = before_reboot(conn, allow_serving=False)
        after_reboot(conn, guard)
    assert [str(g) for g in guard.guests] == ["CT 200 (glm5)", "VM 100 (win-desk)"]
    assert "guests that go down with the node: CT 200 (glm5), VM 100 (win-desk)" in caplog.text
    assert "ha-manager crm-command node-maintenance enable pve1" in conn.ran
    assert conn.ran[-1] == "ha-manager crm-command node-maintenance disable pve1"


def test_reboot_that_would_lose_quorum_is_refused():
    conn = cluster(pvecm(nodes=2, votes=2))
    with pytest.raises(OperationFailed, match="would lose the cluster's quorum .2 votes present, 1 of them"):
        before_reboot(conn, allow_serving=False)
    assert not any("node-maintenance" in c for c in conn.ran)


def test_serving_node_needs_its_name():
    conn = cluster(pvecm(), serving="4711 python3 -m sglang.launch_server --model-path /models/glm\n")
    with pytest.raises(OperationFailed, match="pve1 serves a model .* --reboot-serving pve1"):
        before_reboot(conn, allow_serving=False)
    assert before_reboot(conn, allow_serving=True).maintenance


def test_single_node_skips_quorum_and_ha():
    conn = Scripted({"command -v pct": (0, PCT), "test -e /etc/pve/corosync.conf": (1, "")})
    guard = before_reboot(conn, allow_serving=False)
    assert not guard.maintenance and not any(c.startswith(("pvecm", "ha-manager")) for c in conn.ran)
