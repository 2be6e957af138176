"""What must hold before a PVE node reboots, and what is undone after it.

Before a node reboots gpuhost lists the guests that will go down with it, refuses when the node serves a model
(an SGLang server runs on it or in one of its containers) unless the operator named the node
(``--reboot-serving NODE``), and on a PVE cluster refuses when the cluster would lose quorum without it; when HA
resources run on it, HA maintenance mode is enabled for the reboot (``ha-manager crm-command node-maintenance
enable``, pve-ha-manager ``src/PVE/CLI/ha_manager.pm``), the node is rebooted only once the HA stack has moved them
away (its LRM in maintenance mode), and maintenance is disabled once the node is back (the HA stack then moves
them back: ``maintenance_node``, ``src/PVE/HA/Manager.pm``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from gpuhost.core.progress import report
from gpuhost.core.result import CommandResult
from gpuhost.errors import OperationFailed
from gpuhost.pve.guest_lists import GuestLine, parse_pct_list, parse_qm_list
from gpuhost.pve.ha import HaStatus, parse_ha_status
from gpuhost.pve.quorum import Quorum, parse_pvecm_status, quorum_refusal


class NodeShell(Protocol):
    """What the guard needs of a node's connection: its name and its shell."""

    @property
    def name(self) -> str: ...

    def run(self, command: str, *, check: bool = True) -> CommandResult: ...


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


def _ha_status(conn: NodeShell) -> HaStatus:
    r = conn.run("ha-manager status", check=False)
    if r.exit_code != 0:
        raise OperationFailed(f"{conn.name}: ha-manager status failed: {(r.stderr or r.stdout).strip()[:300]}")
    return parse_ha_status(r.stdout)


def _cluster_quorum(conn: NodeShell) -> Quorum:
    r = conn.run("pvecm status", check=False)
    try:  # on a node outside a cluster pvecm status prints its error on stderr (exit 2)
        return parse_pvecm_status(r.stdout if "Quorum information" in r.stdout else r.stdout + r.stderr)
    except OperationFailed as exc:
        raise OperationFailed(f"{conn.name}: {exc}") from None


def serving_process(conn: NodeShell) -> str | None:
    """The first SGLang server process on the node (or in one of its containers), None when it serves nothing."""
    out = conn.run(SERVING, check=False).stdout.strip()
    if not out:
        return None
    pid, _, command = out.splitlines()[0].partition(" ")  # pgrep -a: "PID COMMAND LINE"
    return (command if pid.isdigit() and command else out.splitlines()[0])[:160]


def serving_refusal(name: str, process: str) -> str:
    return f"{name} serves a model ({process}); it is not rebooted unless you name it: --reboot-serving {name}"


def check_mode_note(conn: NodeShell, allow_serving: bool) -> str | None:
    """What ``--check`` says of a planned reboot of a serving node: that it serves, and the flag it needs."""
    process = serving_process(conn)
    if process is None:
        return None
    if allow_serving:
        return f"{conn.name} serves a model ({process}); --reboot-serving {conn.name} lets it reboot"
    return serving_refusal(conn.name, process)


def before_reboot(
    conn: NodeShell,
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
    serving = serving_process(conn)
    if serving is not None and not allow_serving:
        raise OperationFailed(serving_refusal(name, serving))
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
    conn: NodeShell, guard: RebootGuard, *, sleep: Callable[[float], None], clock: Callable[[], float], timeout: float
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


def after_reboot(conn: NodeShell, guard: RebootGuard) -> None:
    if guard.maintenance:
        conn.run(f"ha-manager crm-command node-maintenance disable {guard.pve_node}")
        guard.maintenance = False
        report(conn.name, "reboot", f"HA maintenance disabled for {guard.pve_node}")
