"""Rolling changes across a cluster: hosts in batches (``serial``), and what must hold before a node reboots.

Before a node reboots gpuhost lists the guests that will go down with it, refuses when the node
serves a model (an SGLang server runs on it or in one of its containers) unless the operator named
the node (``--reboot-serving NODE``), and on a PVE cluster refuses when the cluster would lose quorum
without it; when HA resources run on it, HA maintenance mode is enabled for the reboot
(``ha-manager crm-command node-maintenance enable``) and disabled once the node is back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuhost.connection.base import Connection
from gpuhost.core.progress import report
from gpuhost.errors import OperationFailed


def batches(hosts: list[str], serial: int | None) -> list[list[str]]:
    """``hosts`` in batches of ``serial`` (all in one batch when None)."""
    if not serial or serial >= len(hosts):
        return [list(hosts)] if hosts else []
    return [hosts[i : i + serial] for i in range(0, len(hosts), serial)]


@dataclass(frozen=True)
class GuestLine:
    kind: str  # "CT" or "VM"
    id: int
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.id} ({self.name})" if self.name else f"{self.kind} {self.id}"


def parse_pct_list(text: str) -> list[GuestLine]:
    """Running containers of ``pct list`` (VMID Status [Lock] Name)."""
    out = []
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 2 and parts[0].isdigit() and parts[1] == "running":
            out.append(GuestLine("CT", int(parts[0]), parts[-1] if len(parts) > 2 else ""))
    return out


def parse_qm_list(text: str) -> list[GuestLine]:
    """Running VMs of ``qm list`` (VMID NAME STATUS MEM BOOTDISK PID)."""
    out = []
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 3 and parts[0].isdigit() and parts[2] == "running":
            out.append(GuestLine("VM", int(parts[0]), parts[1]))
    return out


@dataclass(frozen=True)
class Quorum:
    nodes: int
    expected_votes: int
    total_votes: int
    quorum: int
    quorate: bool
    local_votes: int


def parse_pvecm_status(text: str) -> Quorum:
    """``pvecm status`` of a cluster member: the votequorum numbers and this node's votes."""

    def num(label: str) -> int:
        m = re.search(rf"^{label}:\s+(\d+)", text, re.M)
        if not m:
            raise OperationFailed(f"pvecm status without '{label}:' (is this a PVE cluster node?)")
        return int(m.group(1))

    local = re.search(r"^\s*0x[0-9a-fA-F]+\s+(\d+)\s+\S+.*\(local\)", text, re.M)
    quorate = re.search(r"^Quorate:\s+(\w+)", text, re.M)
    return Quorum(
        nodes=num("Nodes"),
        expected_votes=num("Expected votes"),
        total_votes=num("Total votes"),
        quorum=num("Quorum"),
        quorate=bool(quorate and quorate.group(1) == "Yes"),
        local_votes=int(local.group(1)) if local else 1,
    )


def ha_services_on(text: str, node: str) -> list[str]:
    """HA resources ``ha-manager status`` places on ``node`` (``service vm:100 (pve1, started)``)."""
    found = []
    for m in re.finditer(r"^service (\S+) \(([^,)]+)[,)]", text, re.M):
        if m.group(2).strip() == node:
            found.append(m.group(1))
    return found


@dataclass
class RebootGuard:
    """What was found before a reboot, and what must be undone after it."""

    guests: list[GuestLine] = field(default_factory=list)
    pve_node: str = ""
    maintenance: bool = False


#: an SGLang server process, on the node or in one of its containers (their processes are the node's)
SERVING = "pgrep -af '[s]glang.launch_server|[s]glang serve' || true"


def before_reboot(conn: Connection, allow_serving: bool) -> RebootGuard:
    """List the guests that go down; refuse a serving node without consent, or a reboot that loses quorum."""
    guard = RebootGuard()
    name = conn.name
    cts = conn.run("command -v pct >/dev/null && pct list || true", check=False).stdout
    vms = conn.run("command -v qm >/dev/null && qm list || true", check=False).stdout
    guard.guests = parse_pct_list(cts) + parse_qm_list(vms)
    shown = ", ".join(map(str, guard.guests)) or "none running"
    report(name, "reboot", f"guests that go down with the node: {shown}")
    serving = conn.run(SERVING, check=False).stdout.strip()
    if serving and not allow_serving:
        first = serving.splitlines()[0][:160]
        raise OperationFailed(
            f"{name} serves a model ({first}); it is not rebooted unless you name it: --reboot-serving {name}"
        )
    if conn.run("test -e /etc/pve/corosync.conf", check=False).exit_code != 0:
        return guard  # a single node: no quorum, no HA
    status = conn.run("pvecm status", check=False)
    q = parse_pvecm_status(status.stdout)
    if not q.quorate:
        raise OperationFailed(f"{name}: the cluster is not quorate now (pvecm status); no node is rebooted")
    if q.total_votes - q.local_votes < q.quorum:
        raise OperationFailed(
            f"{name}: rebooting it would lose the cluster's quorum ({q.total_votes} votes present, "
            f"{q.local_votes} of them this node's, {q.quorum} needed); bring the other nodes up first"
        )
    guard.pve_node = conn.run("hostname", check=False).stdout.strip() or name
    ha = conn.run("ha-manager status", check=False).stdout
    services = ha_services_on(ha, guard.pve_node)
    if services:
        conn.run(f"ha-manager crm-command node-maintenance enable {guard.pve_node}")
        guard.maintenance = True
        report(name, "reboot", f"HA maintenance enabled for {guard.pve_node} ({', '.join(services)} move away)")
    return guard


def after_reboot(conn: Connection, guard: RebootGuard) -> None:
    if guard.maintenance:
        conn.run(f"ha-manager crm-command node-maintenance disable {guard.pve_node}")
        report(conn.name, "reboot", f"HA maintenance disabled for {guard.pve_node}")
