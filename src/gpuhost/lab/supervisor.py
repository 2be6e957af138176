"""The process that owns a lab's nodes (``python -m gpuhost.lab.supervisor STATE_DIR``).

``lab up`` starts it detached; it boots every node, answers on a control socket (status, stop,
reboot) and on one socket per node (the node's ``reboot`` command). Each node's ``unshare`` has
PR_SET_PDEATHSIG, so if this process dies for any reason its nodes die with it.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from gpuhost.lab.cluster import TICK_S, Cluster, ClusterMember
from gpuhost.lab.layout import LabLayout
from gpuhost.lab.node.line_socket import reachable
from gpuhost.lab.nodeproc import NodeProcess
from gpuhost.lab.spec import LabSpec

READY_TIMEOUT_S = 60.0
REBOOT_DELAY_S = 0.3


class Supervisor:
    def __init__(self, layout: LabLayout) -> None:
        self.layout = layout
        self.spec = LabSpec.from_file(layout.spec_file)
        self.nodes = {n.name: NodeProcess(n, layout) for n in self.spec.nodes}
        self.selector = selectors.DefaultSelector()
        self.listeners: list[tuple[socket.socket, str | None]] = []
        self.pending_reboots: dict[str, float] = {}
        self.powered_off: set[str] = set()
        self.stopping = False
        self.clusters = self._clusters()
        self._next_tick = 0.0

    def _clusters(self) -> dict[str, Cluster]:
        """The lab's PVE clusters, by name: the nodes that share a ``cluster`` name (node ids in spec order)."""
        out: dict[str, Cluster] = {}
        for spec in self.spec.pve_nodes():
            if not spec.cluster:
                continue
            cluster = out.get(spec.cluster)
            if cluster is None:
                cluster = out[spec.cluster] = Cluster(
                    name=spec.cluster,
                    members=[],
                    pmxcfs=self.layout.cluster_dir(spec.cluster),
                    online=self._member_online,
                    shell=self._node_shell,
                    disk_dir=lambda n: self.layout.node(n).disk,
                )
            cluster.members.append(ClusterMember(spec.name, len(cluster.members) + 1, spec.address))
        return out

    def _member_online(self, name: str) -> bool:
        """A member counts once it runs and answers (corosync and pve-cluster are up by the time sshd is)."""
        node = self.nodes[name]
        return node.running() and name not in self.pending_reboots and node.ready()

    def _node_shell(self, name: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """A command inside a node's namespaces, as its LRM would run it there."""
        pid = self.nodes[name].init_pid()
        if pid is None:
            raise RuntimeError(f"{name} is not running")
        cmd = ["nsenter", "-t", str(pid), "-m", "-u", "-p", "-r", "-w", "--", *argv]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} on {name}: exit {r.returncode}: {(r.stderr or r.stdout).strip()}")
        return r

    def _cluster_of(self, node: str) -> Cluster | None:
        return next((c for c in self.clusters.values() if node in {m.name for m in c.members}), None)

    # ---- lifecycle ------------------------------------------------------------------------

    def boot_all(self) -> None:
        """Boot the PVE nodes; a VM's guest boots when its VM starts (:meth:`start_guest`)."""
        pve = {name: n for name, n in self.nodes.items() if not n.spec.guest_of}
        for node in pve.values():
            node.start()
        deadline = time.monotonic() + READY_TIMEOUT_S
        waiting = set(pve)
        while waiting:
            for name in sorted(waiting):
                node = self.nodes[name]
                if not node.running():
                    raise RuntimeError(
                        f"node {name} exited during boot (exit {node.proc.returncode if node.proc else '?'}); "
                        f"see {node.layout.console_log}: {_tail(node.layout.console_log)}"
                    )
                if node.ready():
                    waiting.discard(name)
            if waiting and time.monotonic() > deadline:
                raise RuntimeError(f"nodes not reachable after {READY_TIMEOUT_S:.0f} s: {', '.join(sorted(waiting))}")
            if waiting:
                time.sleep(0.02)

    def stop_all(self) -> None:
        for node in self.nodes.values():
            node.stop()

    def reboot(self, name: str) -> None:
        node = self.nodes[name]
        for guest in self._guests_of(name):  # a node's reboot ends its VMs
            guest.stop()
        node.stop()
        node.start()

    def _guests_of(self, name: str) -> list[NodeProcess]:
        return [n for n in self.nodes.values() if n.spec.guest_of == name]

    def start_guest(self, host: str, request: str) -> str:
        """``qm start`` on ``host``: boot the VM's guest with the hardware its kvm command line gives it."""
        from gpuhost.lab.guest_boot import parse_request, prepare

        vmid, argv = parse_request(request.split(" ", 1))
        spec = self.spec.guest(host, vmid)
        if spec is None:
            return "ok no-guest"  # a VM the lab has no simulated guest for: only its kvm process runs
        guest = self.nodes[spec.name]
        guest.stop()
        prepare(self.layout.node(host).upper, guest.layout.upper, vmid, argv)
        guest.start()
        return "ok"

    def stop_guest(self, host: str, request: str) -> str:
        spec = self.spec.guest(host, int(request.split()[0]))
        if spec is not None:
            self.nodes[spec.name].stop()
        return "ok"

    # ---- control sockets ------------------------------------------------------------------

    def listen(self) -> None:
        self._listen(self.layout.control_socket, None)
        for name, n in self.nodes.items():
            if not n.spec.guest_of:
                self._listen(self.layout.node(name).ctl / "supervisor.sock", name)

    def _listen(self, path: Path, node: str | None) -> None:
        if path.exists() or path.is_socket():
            path.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with reachable(str(path)) as where:
            sock.bind(where)
        os.chmod(path, 0o600)
        sock.listen(16)
        sock.setblocking(False)
        self.selector.register(sock, selectors.EVENT_READ, node)
        self.listeners.append((sock, str(path)))

    def serve(self) -> None:
        while not self.stopping:
            timeout = 0.2
            if self.pending_reboots:
                timeout = max(0.0, min(self.pending_reboots.values()) - time.monotonic())
            for key, _ in self.selector.select(timeout):
                self._handle(key.fileobj, key.data)  # type: ignore[arg-type]
            now = time.monotonic()
            for name, when in list(self.pending_reboots.items()):
                if when <= now:
                    del self.pending_reboots[name]
                    self.reboot(name)
            if self.clusters and now >= self._next_tick:
                self._next_tick = now + TICK_S
                for cluster in self.clusters.values():
                    cluster.tick()

    def _handle(self, listener: socket.socket, node: str | None) -> None:
        try:
            conn, _ = listener.accept()
        except BlockingIOError:
            return
        with conn:
            conn.settimeout(5)
            try:
                line = conn.makefile("r").readline().strip()
                reply = self._command(line, node)
            except Exception as exc:  # report, keep serving
                reply = f"error: {exc}"
            try:
                conn.sendall(reply.encode() + b"\n")
            except OSError:
                pass

    def _command(self, line: str, node: str | None) -> str:
        words = line.split()
        if not words:
            return "error: empty command"
        verb, args = words[0], words[1:]
        if node is not None:  # a node's own socket: it may reboot itself and start or stop its VMs' guests
            if verb == "reboot":
                self.pending_reboots[node] = time.monotonic() + REBOOT_DELAY_S
                return "ok"
            if verb == "vm-start" and args:
                return self.start_guest(node, line.split(" ", 1)[1])
            if verb == "vm-stop" and args:
                return self.stop_guest(node, line.split(" ", 1)[1])
            if verb in ("cluster-status", "ha-status", "ha-crm"):
                return self._cluster_command(node, verb, args)
            return f"error: unknown command {verb!r}"
        if verb == "status":
            return json.dumps(self.status())
        if verb == "reboot" and len(args) == 1 and args[0] in self.nodes:
            self.pending_reboots[args[0]] = time.monotonic() + REBOOT_DELAY_S
            return "ok"
        if verb == "stop":
            self.stopping = True
            return "ok"
        if verb in ("poweroff", "poweron") and len(args) == 1 and args[0] in self.nodes:
            return self.power(args[0], verb == "poweron")
        return f"error: unknown command {line!r}"

    def _cluster_command(self, node: str, verb: str, args: list[str]) -> str:
        cluster = self._cluster_of(node)
        if cluster is None:
            return "error: not a cluster member"
        if verb == "cluster-status":
            return json.dumps({**cluster.quorum(), "local": node})
        if verb == "ha-status":
            return json.dumps({**cluster.ha_status(), "local": node, "quorate": cluster.quorate()})
        return cluster.crm_command(args)

    def power(self, name: str, on: bool) -> str:
        """A node switched off (its guests with it) or on again: what a cluster's quorum tests need."""
        node = self.nodes[name]
        if on:
            if not node.running():
                node.start()
            self.powered_off.discard(name)
        else:
            for guest in self._guests_of(name):
                guest.stop()
            node.stop()
            self.powered_off.add(name)
        return "ok"

    def status(self) -> dict[str, object]:
        return {
            "pid": os.getpid(),
            "nodes": [
                {
                    "name": n.spec.name,
                    "address": n.spec.address,
                    **({"guest_of": n.spec.guest_of, "vmid": n.spec.vmid} if n.spec.guest_of else {}),
                    "boot": n.spec.boot,
                    "cpu": n.spec.cpu,
                    "pve": n.spec.pve,
                    "running": n.running(),
                    "init_pid": n.init_pid(),
                    "boots": n.boots,
                    "rebooting": n.spec.name in self.pending_reboots,
                    "cmdline": n.cmdline,
                    "started_at": n.started_at,
                }
                for n in self.nodes.values()
            ],
        }

    def close(self) -> None:
        for sock, path in self.listeners:
            sock.close()
            if path is None:  # an abstract or inherited socket: no file to remove
                continue
            try:
                os.unlink(path)
            except OSError:
                pass


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def main(argv: list[str]) -> int:
    layout = LabLayout(Path(argv[0]))
    sup = Supervisor(layout)

    def on_term(signum: int, frame: object) -> None:
        sup.stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    layout.supervisor_pid_file.write_text(f"{os.getpid()}\n")
    try:
        sup.listen()
        sup.boot_all()
    except Exception as exc:
        sup.stop_all()
        sup.close()
        print(f"error: {exc}", flush=True)
        return 1
    print("ready", flush=True)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    try:
        sup.serve()
    finally:
        sup.stop_all()
        sup.close()
        try:
            layout.supervisor_pid_file.unlink()
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
