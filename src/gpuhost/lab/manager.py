"""``gpuhost lab up|down|status``: start a lab, stop exactly what it started, report on it."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpuhost.errors import LabError, UsageError
from gpuhost.lab import control
from gpuhost.lab.boot_script import BOOT_SCRIPT
from gpuhost.lab.credentials import new_ca, new_password, new_token_secret, ssh_keygen, write_secret
from gpuhost.lab.inventory import render_inventory
from gpuhost.lab.layout import LabLayout
from gpuhost.lab.nodeproc import API_PORT
from gpuhost.lab.ownership import Ownership, claim, read_marker, record, remove_owned, require_owned
from gpuhost.lab.seed import NodeSecrets, SeedHook, install_node_library, seed_node
from gpuhost.lab.spec import LabSpec, NodeSpec, require_loopback

SUPERVISOR_START_TIMEOUT_S = 90.0
REQUIRED_COMMANDS = ("unshare", "mount", "nsenter", "openssl", "/usr/sbin/sshd")
# Entries the supervisor makes in the state directory after lab up wrote the rest.
_RUNTIME_ENTRIES = ["supervisor.sock", "supervisor.pid", "supervisor.log"]


@dataclass(frozen=True)
class LabInfo:
    state_dir: Path
    inventory: Path
    nodes: list[dict[str, object]]
    supervisor_pid: int | None


def state_path(state_dir: Path) -> Path:
    """The absolute state directory, its parents' links resolved but not its own (a state directory
    that is itself a link is refused, not followed)."""
    p = Path(os.path.abspath(state_dir))
    return p.parent.resolve() / p.name


def require_root() -> None:
    if os.geteuid() != 0:
        raise LabError(
            "gpuhost lab needs root: it creates mount, UTS and PID namespaces and runs sshd "
            "for every node (run it with sudo, or as root in CI)"
        )


def _require_tools() -> None:
    missing = [c for c in REQUIRED_COMMANDS if shutil.which(c) is None and not Path(c).exists()]
    if missing:
        hint = " (apt-get install openssh-server)" if "/usr/sbin/sshd" in missing else ""
        raise LabError(f"the lab needs {', '.join(missing)}{hint}")


def up(
    nodes: list[NodeSpec],
    state_dir: Path,
    seed_dirs: list[Path] | None = None,
    hooks: list[SeedHook] | None = None,
    tie_to_caller: bool = False,
) -> LabInfo:
    """Create the lab's state, seed its nodes, and start the supervisor that boots them.

    ``tie_to_caller``: the supervisor dies with the calling process (for test fixtures)."""
    require_root()
    _require_tools()
    from gpuhost.lab.guest_seed import with_guests

    nodes = with_guests(nodes)  # each seeded GPU VM's guest (booted by the VM's start)
    layout = LabLayout(state_path(state_dir))
    _check_addresses(nodes)
    owner = _claim_state_dir(layout)
    try:
        spec = LabSpec(nodes=nodes, seed_dirs=[str(d) for d in seed_dirs or []])
        _write_lab(layout, spec, [Path(d) for d in spec.seed_dirs], hooks or [])
        record(layout, owner, extra=_RUNTIME_ENTRIES)
        _start_supervisor(layout, tie_to_caller)
        record(layout, owner, extra=_RUNTIME_ENTRIES)
    except BaseException:
        record(layout, owner, extra=_RUNTIME_ENTRIES)
        _stop_and_remove(layout, owner)
        raise
    return status(layout.root)


def down(state_dir: Path) -> bool:
    """Stop the supervisor (and with it every node), then remove the state. False if no lab."""
    require_root()
    layout = LabLayout(state_path(state_dir))
    if not layout.spec_file.exists() and not layout.marker_file.exists():
        return False
    _stop_and_remove(layout, require_owned(layout))
    return True


def status(state_dir: Path) -> LabInfo:
    state_dir = state_path(state_dir)
    layout = LabLayout(state_dir)
    if not layout.spec_file.exists():
        raise LabError(f"no lab in {state_dir} (start one with: gpuhost lab up)")
    pid = _supervisor_pid(layout)
    if pid is None:
        spec = LabSpec.from_file(layout.spec_file)
        nodes = [
            {"name": n.name, "address": n.address, "boot": n.boot, "cpu": n.cpu, "pve": n.pve, "running": False}
            for n in spec.nodes
        ]
        return LabInfo(state_dir, layout.inventory_file, nodes, None)
    data = control.request_json(layout.control_socket, "status")
    return LabInfo(state_dir, layout.inventory_file, data["nodes"], pid)


def reboot_node(state_dir: Path, name: str) -> None:
    control.request(LabLayout(state_dir).control_socket, f"reboot {name}")


def power_node(state_dir: Path, name: str, on: bool) -> None:
    """Switch a node off (as a pulled plug: its processes die) or on again."""
    control.request(LabLayout(state_dir).control_socket, f"{'poweron' if on else 'poweroff'} {name}")


# ---- internals ------------------------------------------------------------------------------


def _claim_state_dir(layout: LabLayout) -> Ownership:
    if layout.spec_file.exists() or layout.marker_file.exists():
        if _supervisor_pid(layout) is not None:
            raise LabError(
                f"a lab is already running in {layout.root} (stop it with: gpuhost lab down"
                f"{'' if layout.root == Path('/run/gpuhost-lab') else f' --state-dir {layout.root}'})"
            )
        old = read_marker(layout)
        if old is None:
            raise UsageError(
                f"state directory {layout.root} holds {layout.spec_file.name} but no gpuhost lab "
                "marker: it was not made by 'gpuhost lab up'; not touching it"
            )
        _stop_and_remove(layout, old)  # leftovers of a lab whose supervisor died
    return claim(layout)


def _check_addresses(nodes: list[NodeSpec]) -> None:
    """Loopback only, unique, and nobody answering there yet (a leftover sshd would take our logins)."""
    for node in nodes:
        require_loopback(node.address)  # never listen anywhere a real machine could be reached
    names = [n.name for n in nodes]
    addresses = [n.address for n in nodes]
    if len(set(names)) != len(names) or len(set(addresses)) != len(addresses):
        raise UsageError("lab node names and addresses must be unique")
    for node in nodes:
        for port in (22, API_PORT):
            if _answers(node.address, port):
                raise UsageError(
                    f"{node.address}:{port} is already in use (another lab, or a leftover sshd?); "
                    f"{node.name} needs it: stop that first or choose another --address"
                )


def _answers(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=0.5):
            return True
    except OSError:
        return False


def _write_lab(layout: LabLayout, spec: LabSpec, seed_dirs: list[Path], hooks: list[SeedHook]) -> None:
    layout.boot_script.write_text(BOOT_SCRIPT)
    install_node_library(layout.node_library)
    from gpuhost.lab.gpu.seed import GpuAssets

    hooks = [GpuAssets(layout, spec).hook, *hooks]  # hardware, NVIDIA installers, apt repository
    ssh_keygen(layout.client_key, "gpuhost-lab-client")
    ca = new_ca()
    layout.ca_cert.write_bytes(ca.cert_pem)
    password = new_password()
    write_secret(layout.root_password_file, password + "\n")
    password_hash = _hash_password(password)
    known_hosts = []
    for node in spec.nodes:
        host_key = layout.root / "nodes" / node.name / "ssh_host_ed25519_key"
        host_key.parent.mkdir(parents=True, exist_ok=True)
        ssh_keygen(host_key, f"root@{node.name}")
        public = host_key.with_suffix(".pub").read_bytes()
        known_hosts.append(f"{node.address} {' '.join(public.decode().split()[:2])}\n")
        token_secret = new_token_secret()
        write_secret(layout.token_file(node.name), token_secret + "\n")
        secrets = NodeSecrets(
            client_public_key=layout.client_key.with_suffix(".pub").read_text(),
            host_key_private=host_key.read_bytes(),
            host_key_public=public,
            tls=ca.issue(node.name, node.address),
            ca_pem=ca.cert_pem,
            token_id=spec.token_id,
            token_secret=token_secret,
            root_password_hash=password_hash,
        )
        seed_node(layout.node(node.name), node, secrets, seed_dirs, hooks)
    _seed_clusters(layout, spec)
    layout.known_hosts.write_text("".join(known_hosts))
    layout.spec_file.write_text(spec.to_json())
    layout.inventory_file.write_text(render_inventory(layout, spec))


def _seed_clusters(layout: LabLayout, spec: LabSpec) -> None:
    from gpuhost.lab.cluster import ClusterMember, seed_cluster

    clusters: dict[str, list[ClusterMember]] = {}
    for node in spec.pve_nodes():
        if node.cluster:
            members = clusters.setdefault(node.cluster, [])
            members.append(ClusterMember(node.name, len(members) + 1, node.address))
    for name, members in clusters.items():
        uppers = {m.name: layout.node(m.name).upper for m in members}
        links = {m.name: layout.node(m.name).dir / "pmxcfs" for m in members}
        seed_cluster(layout.cluster_dir(name), name, members, uppers, links)


def _hash_password(password: str) -> str:
    result = subprocess.run(
        ["openssl", "passwd", "-6", "-stdin"], input=password + "\n", capture_output=True, text=True
    )
    if result.returncode != 0:
        raise LabError(f"openssl passwd failed (exit {result.returncode}): {result.stderr.strip()}")
    return result.stdout.strip()


def _start_supervisor(layout: LabLayout, tie_to_caller: bool) -> None:
    log = open(layout.supervisor_log, "ab")
    preexec: Callable[[], None] | None = None
    if tie_to_caller:
        from gpuhost.lab.nodeproc import _die_with_parent as preexec  # noqa: N813
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpuhost.lab.supervisor", str(layout.root)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            start_new_session=not tie_to_caller,
            close_fds=True,
            preexec_fn=preexec,
        )
    finally:
        log.close()
    assert proc.stdout is not None
    deadline = time.monotonic() + SUPERVISOR_START_TIMEOUT_S
    line = proc.stdout.readline().decode().strip()
    proc.stdout.close()
    if line != "ready":
        proc.wait(max(1.0, deadline - time.monotonic()))
        detail = line or _tail(layout.supervisor_log)
        raise LabError(f"the lab did not start: {detail}")


def _supervisor_pid(layout: LabLayout) -> int | None:
    try:
        pid = int(layout.supervisor_pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    if b"gpuhost.lab.supervisor" not in cmdline or str(layout.root).encode() not in cmdline:
        return None
    return pid


def _stop_and_remove(layout: LabLayout, owner: Ownership) -> None:
    pid = _supervisor_pid(layout)
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            _reap(pid)
            time.sleep(0.02)
        if Path(f"/proc/{pid}").exists():
            os.kill(pid, signal.SIGKILL)  # its nodes die with it (PR_SET_PDEATHSIG)
            time.sleep(0.1)
            _reap(pid)
    _wait_unmounted(layout.root)
    remove_owned(layout, owner)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _wait_unmounted(root: Path, timeout: float = 10.0) -> None:
    """Never delete a directory something is still mounted on (it would delete through the mount)."""
    prefix = str(root.resolve()) + "/"
    deadline = time.monotonic() + timeout
    while True:
        mounted = [m for m in _mount_points() if m.startswith(prefix)]
        if not mounted:
            return
        if time.monotonic() > deadline:
            raise LabError(f"still mounted under {root}: {', '.join(mounted[:5])}; not removing it")
        time.sleep(0.05)


def _mount_points() -> list[str]:
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        if len(fields) > 4:
            points.append(fields[4].replace("\\040", " "))
    return points


def _tail(path: Path, lines: int = 10) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
