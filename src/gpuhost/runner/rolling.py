"""Rolling changes across a cluster: what must hold before a node reboots (the batches of ``serial`` are
:func:`gpuhost.runner.serial.batches`).

Before a node reboots gpuhost lists the guests that will go down with it, refuses when the node
serves a model (an SGLang server runs on it or in one of its containers) unless the operator named
the node (``--reboot-serving NODE``), and on a PVE cluster refuses when the cluster would lose quorum
without it; when HA resources run on it, HA maintenance mode is enabled for the reboot
(``ha-manager crm-command node-maintenance enable``), the node is rebooted only once the HA stack has
moved them away (its LRM in maintenance mode), and maintenance is disabled once the node is back.

The parsers read the texts of PVE's own commands; they are tested on real captures
(tests/fixtures/cluster/, SOURCE.md there names each one's origin).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gpuhost.connection.base import Connection
from gpuhost.core.progress import report
from gpuhost.errors import OperationFailed


@dataclass(frozen=True)
class GuestLine:
    kind: str  # "CT" or "VM"
    id: int
    name: str
    status: str = "running"

    def __str__(self) -> str:
        shown = ", ".join(x for x in (self.name, "" if self.status == "running" else self.status) if x)
        return f"{self.kind} {self.id} ({shown})" if shown else f"{self.kind} {self.id}"


#: where ``pct list``'s Lock column starts: ``printf "%-10s %-10s %-12s %-20s"`` (pve-container's pct.pm)
_PCT_LOCK_AT = 22


@dataclass(frozen=True)
class PctRow:
    vmid: int
    status: str
    lock: str
    name: str


def pct_rows(text: str) -> list[PctRow]:
    """The rows of ``pct list``: VMID, Status, Lock and Name (``%-10s %-10s %-12s %-20s``). Lock is mostly blank,
    and a lock longer than its column (``snapshot-delete``) pushes the name to the right. On a node without
    containers it prints nothing, not even the header."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 2 or not parts[0].isdigit():
            continue
        rest, lock = line[_PCT_LOCK_AT:], ""
        if rest[:1].strip():  # a lock; the name follows it
            lock, _, rest = rest.partition(" ")
        out.append(PctRow(int(parts[0]), parts[1], lock, rest.strip()))
    return out


def parse_pct_list(text: str) -> list[GuestLine]:
    """The containers of ``pct list`` that go down with the node: every one not ``stopped``."""
    return [GuestLine("CT", r.vmid, r.name, r.status) for r in pct_rows(text) if r.status != "stopped"]


@dataclass(frozen=True)
class QmRow:
    vmid: int
    name: str
    status: str
    mem_mb: float
    bootdisk_gb: float
    pid: int


#: a row of ``qm list`` (``printf "%10s %-20s %-10s %-10s %12.2f %-10s"``, qemu-server's qm.pm), read from the
#: right: a name longer than 20 characters pushes the columns after it, and a VM without a name is "VM <vmid>"
_QM_ROW = re.compile(r"^\s*(\d+) (.*?)\s+(\S+)\s+(\d+(?:\.\d+)?)\s+(\d+\.\d\d)\s+(\d+)\s*$")


def qm_rows(text: str) -> list[QmRow]:
    """The rows of ``qm list`` (VMID NAME STATUS MEM(MB) BOOTDISK(GB) PID); nothing on a node without VMs."""
    out = []
    for line in text.splitlines():
        m = _QM_ROW.match(line)
        if m:
            out.append(QmRow(int(m[1]), m[2].strip(), m[3], float(m[4]), float(m[5]), int(m[6])))
    return out


def parse_qm_list(text: str) -> list[GuestLine]:
    """The VMs of ``qm list`` that go down with the node: every one not ``stopped`` (running, paused, …)."""
    return [GuestLine("VM", r.vmid, r.name, r.status) for r in qm_rows(text) if r.status != "stopped"]


@dataclass(frozen=True)
class Member:
    """A row of ``pvecm status``'s membership list (``corosync-quorumtool -siH``)."""

    nodeid: int
    votes: int
    name: str
    local: bool
    qdevice: str | None = None  # the Qdevice column (A,V,NMW …) when the cluster has a QDevice


@dataclass(frozen=True)
class Quorum:
    nodes: int
    expected_votes: int
    total_votes: int
    quorum: int
    quorate: bool
    flags: tuple[str, ...]
    members: tuple[Member, ...]

    @property
    def local_votes(self) -> int | None:
        """This node's votes (the row marked ``(local)``); None when the list shows no such row."""
        return next((m.votes for m in self.members if m.local), None)

    @property
    def qdevice_votes(self) -> int:
        """The votes the QDevice casts now (its row: node id 0, named ``Qdevice``)."""
        return sum(m.votes for m in self.members if m.nodeid == 0)


_QDEVICE_FLAGS = re.compile(r"^(?:NR|N?A|N?V|N?MW)(?:,(?:NR|N?A|N?V|N?MW))*$")
_MEMBER = re.compile(r"^\s*(0x[0-9a-fA-F]+|\d+)\s+(\d+)\s+(.*?)\s*$")


def _members(text: str) -> tuple[Member, ...]:
    lines = text.splitlines()
    try:
        at = next(i for i, line in enumerate(lines) if line.strip() == "Membership information")
    except StopIteration:
        return ()
    out = []
    for line in lines[at + 1 :]:
        m = _MEMBER.match(line)
        if not m:
            continue
        rest = m[3]
        local = rest.endswith("(local)")
        if local:
            rest = rest[: -len("(local)")].rstrip()
        flags, _, name = rest.partition(" ")
        qdevice = flags if name and _QDEVICE_FLAGS.match(flags) else None
        out.append(Member(int(m[1], 0), int(m[2]), name.strip() if qdevice else rest, local, qdevice))
    return tuple(out)


def parse_pvecm_status(text: str) -> Quorum:
    """``pvecm status`` of a cluster member (its own lines, then ``corosync-quorumtool -siH``'s): the votequorum
    numbers, the flags and the members. PVE before 6 printed no "Cluster information" part; the votes column of a
    QDevice cluster comes with a Qdevice column; a node that is not quorate says ``Quorum: 2 Activity blocked``."""
    if "Quorum information" not in text:
        said = [line.strip() for line in text.splitlines() if line.strip()] or ["nothing"]
        if "is this node part of a cluster" in text:
            raise OperationFailed(f"pvecm status: not a cluster member ({said[0]})")
        raise OperationFailed(f"pvecm status printed no quorum information ({said[-1][:200]})")  # its error last

    def num(label: str) -> int:
        m = re.search(rf"^{label}:\s+(\d+)", text, re.M)
        if not m:
            raise OperationFailed(f"pvecm status without '{label}:'")
        return int(m.group(1))

    quorate = re.search(r"^Quorate:\s+(\w+)", text, re.M)
    flags = re.search(r"^Flags:(.*)$", text, re.M)
    return Quorum(
        nodes=num("Nodes"),
        expected_votes=num("Expected votes"),
        total_votes=num("Total votes"),
        quorum=num("Quorum"),
        quorate=bool(quorate and quorate.group(1) == "Yes"),
        flags=tuple(flags.group(1).split()) if flags else (),
        members=_members(text),
    )


@dataclass(frozen=True)
class HaService:
    sid: str  # vm:100, ct:101
    node: str
    state: str  # started, stopped, ignored, …


@dataclass(frozen=True)
class HaStatus:
    quorum_ok: bool
    master: str | None
    lrm: dict[str, str]  # node -> its state (active, idle, maintenance mode, …)
    services: tuple[HaService, ...]

    def on(self, node: str) -> list[HaService]:
        return [s for s in self.services if s.node == node]

    def to_move(self, node: str) -> list[HaService]:
        """The HA resources on ``node`` that its reboot would stop: all but those at rest."""
        return [s for s in self.on(node) if s.state not in AT_REST]


#: states of an HA resource that the node's reboot does not stop: nothing to move away
AT_REST = frozenset({"stopped", "ignored", "disabled"})


def parse_ha_status(text: str) -> HaStatus:
    """``ha-manager status``: ``quorum OK``, ``master NODE (active, …)``, ``lrm NODE (STATE, …)`` and
    ``service SID (NODE, STATE)`` lines (PVE 9 adds a ``fencing`` line and the watchdog to each lrm line)."""
    master = re.search(r"^master (\S+) \(", text, re.M)
    lrm = {m[1]: m[2].split(",")[0].strip() for m in re.finditer(r"^lrm (\S+) \((.*)\)\s*$", text, re.M)}
    services = tuple(
        HaService(m[1], m[2].strip(), m[3].strip())
        for m in re.finditer(r"^service (\S+) \(([^,)]+), ([^)]+)\)", text, re.M)
    )
    return HaStatus(bool(re.search(r"^quorum OK\s*$", text, re.M)), master[1] if master else None, lrm, services)


@dataclass
class RebootGuard:
    """What was found before a reboot, and what must be undone after it."""

    guests: list[GuestLine] = field(default_factory=list)
    pve_node: str = ""
    maintenance: bool = False


#: an SGLang server process, on the node or in one of its containers (their processes are the node's)
SERVING = "pgrep -af '[s]glang.launch_server|[s]glang serve' || true"

#: how long the HA stack may take to move the node's resources away once maintenance is enabled
HA_MOVE_TIMEOUT = 900.0
HA_POLL = 5.0


def _ha_status(conn: Connection) -> HaStatus:
    r = conn.run("ha-manager status", check=False)
    if r.exit_code != 0:
        raise OperationFailed(f"{conn.name}: ha-manager status failed: {(r.stderr or r.stdout).strip()[:300]}")
    return parse_ha_status(r.stdout)


def _cluster_quorum(conn: Connection) -> Quorum:
    r = conn.run("pvecm status", check=False)
    try:  # on a node outside a cluster pvecm status prints its error on stderr (exit 2)
        return parse_pvecm_status(r.stdout if "Quorum information" in r.stdout else r.stdout + r.stderr)
    except OperationFailed as exc:
        raise OperationFailed(f"{conn.name}: {exc}") from None


def quorum_refusal(q: Quorum) -> str | None:
    """Why this node must not reboot now, from its ``pvecm status``; None when the others keep quorum without it.

    The votes left while it is down are the total less its own (a QDevice's vote stays with the others)."""
    if not q.quorate:
        return (
            f"the cluster is not quorate now ({q.total_votes} of {q.expected_votes} expected votes, {q.quorum} "
            "needed; pvecm status); no node is rebooted"
        )
    local = q.local_votes
    if local is None:
        return "pvecm status lists no row for this node (local); its votes are unknown"
    if q.total_votes - local < q.quorum:
        return (
            f"rebooting it would lose the cluster's quorum ({q.total_votes} of {q.expected_votes} expected votes "
            f"present, {local} of them this node's, {q.quorum} needed); bring the other nodes up first"
        )
    return None


def before_reboot(
    conn: Connection,
    allow_serving: bool,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    move_timeout: float = HA_MOVE_TIMEOUT,
) -> RebootGuard:
    """List the guests that go down; refuse a serving node without consent, or a reboot that loses quorum; with HA
    resources on the node, enable HA maintenance and wait until the HA stack has moved them away."""
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
    refused = quorum_refusal(_cluster_quorum(conn))
    if refused:
        raise OperationFailed(f"{name}: {refused}")
    guard.pve_node = conn.run("hostname", check=False).stdout.strip() or name
    node = guard.pve_node
    moving = _ha_status(conn).to_move(node)
    if moving:
        conn.run(f"ha-manager crm-command node-maintenance enable {node}")
        guard.maintenance = True
        listed = ", ".join(f"{s.sid} ({s.state})" for s in moving)
        report(name, "reboot", f"HA maintenance enabled for {node}; waiting for the HA stack to move {listed} away")
        _wait_moved(conn, guard, sleep=sleep, clock=clock, timeout=move_timeout)
    return guard


def _wait_moved(
    conn: Connection, guard: RebootGuard, *, sleep: Callable[[float], None], clock: Callable[[], float], timeout: float
) -> None:
    """Until the node's LRM is in maintenance mode and no HA resource that would stop is left on it."""
    node, start = guard.pve_node, clock()
    while True:
        st = _ha_status(conn)
        left = st.to_move(node)
        mode = st.lrm.get(node, "not listed")
        if mode == "maintenance mode" and not left:
            report(conn.name, "reboot", f"HA resources moved off {node} (its LRM in maintenance mode)", clock() - start)
            return
        if clock() - start >= timeout:
            after_reboot(conn, guard)
            still = ", ".join(f"{s.sid} ({s.state})" for s in left) or "none"
            raise OperationFailed(
                f"{conn.name}: after {timeout:.0f} s the HA stack has not moved everything off {node} (its LRM: "
                f"{mode}; still there: {still}); maintenance was disabled again and the node is not rebooted"
            )
        shown = ", ".join(s.sid for s in left) or "nothing left"
        report(conn.name, "reboot", f"HA moving off {node}: {shown} (LRM: {mode})", clock() - start, update=True)
        sleep(HA_POLL)


def after_reboot(conn: Connection, guard: RebootGuard) -> None:
    if guard.maintenance:
        conn.run(f"ha-manager crm-command node-maintenance disable {guard.pve_node}")
        guard.maintenance = False
        report(conn.name, "reboot", f"HA maintenance disabled for {guard.pve_node}")
