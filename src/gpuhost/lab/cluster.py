"""A lab PVE cluster, kept by the supervisor: corosync's membership and votequorum, pmxcfs's shared files, and the
HA stack's CRM and LRMs (node maintenance, resources moved off a node in maintenance and back when it leaves it).

What a real cluster does, and where (the lab follows each where gpuhost depends on it):

* **Membership and quorum** (corosync votequorum): every node of ``corosync.conf``'s nodelist has one vote;
  expected votes are the nodelist's, quorum is ``expected / 2 + 1`` (corosync ``exec/votequorum.c``,
  ``calculate_quorum``); a node is a member while it runs (the lab has no network partitions). A node whose
  cluster is not quorate blocks activity (``Quorum: 2 Activity blocked``).
* **pmxcfs** (``/etc/pve``): one tree for the cluster, ``nodes/<node>/lxc|qemu-server`` the guests of each node
  and ``ha/resources.cfg`` the HA resources; the lab bind-mounts one host folder at ``/etc/pve/nodes`` and one at
  ``/etc/pve/ha`` in every member (``boot_script.BOOT_SCRIPT``). Moving a guest to another node is moving its
  config file between those folders, as ``PVE::LXC::Migrate``/``PVE::QemuMigrate`` do at the end of a migration.
* **CRM** (pve-ha-manager ``src/PVE/HA/Manager.pm``): ``enable-node-maintenance NODE`` (``ha-manager crm-command
  node-maintenance enable``) puts an online node in maintenance; its resources are moved to the online node that
  is not in maintenance with the fewest resources, then by name (``select_service_node``, the ``basic`` usage
  scheduler ``PVE::HA::Usage::Basic``: a node's score is its resource count), remembering the node as
  ``maintenance_node``; when maintenance is disabled they move back to it ("moving service … back to …, node came
  back from maintenance", ``next_state_started``). A VM is migrated (``migrate``), a container relocated
  (``relocate``: stopped, moved, started). While the stack is disarmed the CRM ignores maintenance commands
  (``enable-node-maintenance``: "HA stack is disarmed"). The master is the CRM holding the manager lock; the lab
  names the first online node.
* **LRM**: runs the CRM's orders on its node; its mode is ``maintenance`` once its node is (``Status.pm`` shows
  ``maintenance mode``). The lab's LRM runs ``pct``/``qm`` inside the node's namespaces (``nsenter``).

Not simulated: fencing of a node that dies with resources on it, HA groups and rules, failback settings,
``max_relocate``/``max_restart``, a QDevice.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

TICK_S = 0.5
#: ``ha/resources.cfg`` as PVE's SectionConfig writes it (``PVE::SectionConfig::write_config``): ``TYPE: ID``, then
#: one tab-indented ``key value`` line per option, a blank line between sections
_SECTION = re.compile(r"^(vm|ct):\s*(\d+)\s*$")
_OPTION = re.compile(r"^\s+(\S+)\s+(.*?)\s*$")


@dataclass
class Service:
    sid: str  # vm:100, ct:810
    node: str
    state: str = "started"  # CRM state: started, stopped, migrate, relocate, ignored
    requested: str = "started"  # resources.cfg ``state``
    maintenance_node: str | None = None
    target: str | None = None  # while it moves

    @property
    def kind(self) -> str:
        return self.sid.split(":")[0]

    @property
    def vmid(self) -> int:
        return int(self.sid.split(":")[1])


@dataclass
class ClusterMember:
    name: str
    nodeid: int
    address: str


@dataclass
class Cluster:
    """One cluster's state; ``online(name)`` says whether a member runs, ``shell(name, argv)`` runs a command in it,
    ``node_dir(name)`` is where its guests' disks are on the host."""

    name: str
    members: list[ClusterMember]
    pmxcfs: Path  # the host folder of the shared tree: nodes/, ha/
    online: Callable[[str], bool]
    shell: Callable[[str, list[str]], subprocess.CompletedProcess[str]]
    disk_dir: Callable[[str], Path]
    services: dict[str, Service] = field(default_factory=dict)
    maintenance: set[str] = field(default_factory=set)
    disarmed: str | None = None  # the disarm resource mode (freeze, ignore), None when armed
    log: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _moving: threading.Thread | None = None

    # ---- corosync ----------------------------------------------------------------------------

    def quorum(self) -> dict[str, object]:
        up = [m for m in self.members if self.online(m.name)]
        expected = len(self.members)
        quorum = expected // 2 + 1
        return {
            "cluster_name": self.name,
            "members": [{"name": m.name, "nodeid": m.nodeid, "address": m.address, "votes": 1} for m in up],
            "expected_votes": expected,
            "total_votes": len(up),
            "quorum": quorum,
            "quorate": len(up) >= quorum,
        }

    def quorate(self) -> bool:
        return bool(self.quorum()["quorate"])

    # ---- HA: resources, commands, status -------------------------------------------------------

    def _read_resources(self) -> dict[str, str]:
        """sid -> requested state, from the shared ``ha/resources.cfg``."""
        path = self.pmxcfs / "ha" / "resources.cfg"
        try:
            text = path.read_text()
        except FileNotFoundError:
            return {}
        out: dict[str, str] = {}
        sid = None
        for line in text.splitlines():
            m = _SECTION.match(line)
            if m:
                sid = f"{m[1]}:{m[2]}"
                out[sid] = "started"  # the default of ``state`` (PVE::HA::Resources, ``state`` option)
                continue
            o = _OPTION.match(line)
            if o and sid and o[1] == "state":
                out[sid] = "started" if o[2] == "enabled" else o[2]  # "enabled" is the old name of started
        return out

    def _guest_node(self, kind: str, vmid: int) -> str | None:
        sub = "lxc" if kind == "ct" else "qemu-server"
        for m in self.members:
            if (self.pmxcfs / "nodes" / m.name / sub / f"{vmid}.conf").exists():
                return m.name
        return None

    def crm_command(self, words: list[str]) -> str:
        """``node-maintenance enable|disable NODE``, ``disarm-ha freeze|ignore``, ``arm-ha``."""
        with self._lock:
            if len(words) == 3 and words[0] == "node-maintenance" and words[1] in ("enable", "disable"):
                node = words[2]
                if node not in {m.name for m in self.members}:
                    return f"error: no such node '{node}'"
                if words[1] == "enable":
                    if self.disarmed:
                        self.log.append(f"ignoring maintenance command for node {node} - HA stack is disarmed")
                    elif self.online(node):
                        self.maintenance.add(node)
                    else:
                        self.log.append(f"crm command error - node not online: enable-node-maintenance {node}")
                else:
                    self.maintenance.discard(node)
                return "ok"
            if len(words) == 2 and words[0] == "disarm-ha" and words[1] in ("freeze", "ignore"):
                self.disarmed = words[1]
                return "ok"
            if words == ["arm-ha"]:
                self.disarmed = None
                return "ok"
        return f"error: unknown crm command {' '.join(words)!r}"

    def ha_status(self) -> dict[str, object]:
        """What ``ha-manager status`` prints, as data (the node tool writes the lines)."""
        with self._lock:
            online = [m.name for m in self.members if self.online(m.name)]
            lrm = {}
            for m in self.members:
                if not self.online(m.name):
                    lrm[m.name] = "old timestamp - dead?"  # Status.pm $timestamp_to_status: no update for 30 s
                elif self.disarmed:
                    lrm[m.name] = "disarm mode"
                elif m.name in self.maintenance:
                    lrm[m.name] = "maintenance mode"
                elif any(s.node == m.name for s in self.services.values()):
                    lrm[m.name] = "active"
                else:
                    lrm[m.name] = "idle"  # wait_for_agent_lock without active services
            services = []
            for s in sorted(self.services.values(), key=lambda s: s.sid):
                state = "ignore" if self.disarmed == "ignore" else s.state
                services.append({"sid": s.sid, "node": s.node, "state": state})
            return {
                "quorate": self.quorate(),
                "master": online[0] if online and self.services else None,
                "lrm": lrm if self.services else {},
                "services": services,
                "disarmed": self.disarmed,
            }

    # ---- the CRM's loop -------------------------------------------------------------------------

    def tick(self) -> None:
        """One CRM round: take in resources.cfg, then start one move that the node states call for."""
        if self._moving is not None and self._moving.is_alive():
            return
        with self._lock:
            wanted = self._read_resources()
            for sid in list(self.services):
                if sid not in wanted:
                    del self.services[sid]
            for sid, requested in wanted.items():
                s = self.services.get(sid)
                if s is None:
                    kind, vmid = sid.split(":")
                    node = self._guest_node(kind, int(vmid))
                    if node is None:
                        continue
                    s = self.services[sid] = Service(sid, node, "started" if requested == "started" else requested)
                s.requested = requested
                if requested in ("ignored", "stopped", "disabled"):
                    s.state = requested if requested != "disabled" else "stopped"
            if not self.services or self.disarmed or not self.quorate():
                return
            move = self._next_move()
        if move is not None:
            self._moving = threading.Thread(target=self._move, args=move, daemon=True)
            self._moving.start()

    def _next_move(self) -> tuple[Service, str] | None:
        usable = [m.name for m in self.members if self.online(m.name) and m.name not in self.maintenance]
        for s in sorted(self.services.values(), key=lambda s: s.sid):
            if s.requested != "started" or not self.online(s.node):
                continue
            if s.node in self.maintenance:
                if not usable:
                    continue
                counts = {n: sum(1 for o in self.services.values() if o.node == n) for n in usable}
                target = sorted(usable, key=lambda n: (counts[n], n))[0]
                s.maintenance_node = s.maintenance_node or s.node
                return s, target
            back = s.maintenance_node
            if back and back != s.node and back in usable:
                self.log.append(f"moving service '{s.sid}' back to '{back}', node came back from maintenance.")
                s.maintenance_node = None
                return s, back
        return None

    def _move(self, s: Service, target: str) -> None:
        """A VM's ``migrate`` (offline here: stop, move, start) or a container's ``relocate``."""
        tool = "pct" if s.kind == "ct" else "qm"
        with self._lock:
            s.state, s.target = ("relocate" if s.kind == "ct" else "migrate"), target
        source = s.node
        try:
            self.shell(source, [tool, "stop", str(s.vmid)])
            sub = "lxc" if s.kind == "ct" else "qemu-server"
            conf = self.pmxcfs / "nodes" / source / sub / f"{s.vmid}.conf"
            dest = self.pmxcfs / "nodes" / target / sub / f"{s.vmid}.conf"
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(conf, dest)
            disk = self.disk_dir(source) / "ct" / str(s.vmid)
            if s.kind == "ct" and disk.exists():
                to = self.disk_dir(target) / "ct" / str(s.vmid)
                to.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(disk), str(to))
            with self._lock:
                s.node = target
            self.shell(target, [tool, "start", str(s.vmid)])
            with self._lock:
                s.state, s.target = "started", None
        except Exception as exc:  # noqa: BLE001 - the CRM goes on; the service shows the error state
            with self._lock:
                s.state, s.target = "error", None
            self.log.append(f"moving {s.sid} from {source} to {target} failed: {exc}")


#: ``/etc/pve/corosync.conf`` as ``pvecm create`` writes it (pve-cluster ``src/PVE/Corosync.pm``, ``create_conf``:
#: totem version 2, secauth on, ip_version ipv4-6, link_mode passive, one interface per link; each node's name,
#: nodeid, quorum_votes and ring0_addr; votequorum; logging to syslog), sections and keys sorted as
#: ``write_conf`` writes them, with ``config_version`` raised once per node that joined
def corosync_conf(name: str, members: list[ClusterMember]) -> str:
    nodes = "".join(
        f"  node {{\n    name: {m.name}\n    nodeid: {m.nodeid}\n    quorum_votes: 1\n    ring0_addr: {m.address}\n  }}\n"
        for m in members
    )
    return (
        "logging {\n  debug: off\n  to_syslog: yes\n}\n\n"
        f"nodelist {{\n{nodes}}}\n\n"
        "quorum {\n  provider: corosync_votequorum\n}\n\n"
        f"totem {{\n  cluster_name: {name}\n  config_version: {len(members)}\n  interface {{\n    linknumber: 0\n  }}\n"
        "  ip_version: ipv4-6\n  link_mode: passive\n  secauth: on\n  version: 2\n}\n"
    )


def seed_cluster(
    pmxcfs: Path, name: str, members: list[ClusterMember], uppers: dict[str, Path], links: dict[str, Path]
) -> None:
    """Make the cluster's shared tree: every member's ``/etc/pve/nodes/<node>`` moves into it (the node's own tree
    keeps an empty ``nodes/`` and ``ha/`` to mount it on), each member gets ``corosync.conf``, and ``links[node]``
    points at the tree (the boot script mounts it when it exists)."""
    (pmxcfs / "nodes").mkdir(parents=True, exist_ok=True)
    (pmxcfs / "ha").mkdir(exist_ok=True)
    conf = corosync_conf(name, members)
    for m in members:
        up = uppers[m.name]
        own = up / "etc" / "pve" / "nodes" / m.name
        if own.exists():
            shutil.move(str(own), str(pmxcfs / "nodes" / m.name))
        (up / "etc" / "pve" / "nodes").mkdir(parents=True, exist_ok=True)
        (up / "etc" / "pve" / "ha").mkdir(exist_ok=True)
        (up / "etc" / "pve" / "corosync.conf").write_text(conf)
        link = links[m.name]
        if link.is_symlink():
            link.unlink()
        link.symlink_to(pmxcfs)


def wait_moves(cluster: Cluster, timeout: float = 60.0) -> None:
    """Until no move runs (for the supervisor's shutdown)."""
    deadline = time.monotonic() + timeout
    while cluster._moving is not None and cluster._moving.is_alive() and time.monotonic() < deadline:
        cluster._moving.join(0.1)
