"""pytest fixtures that start lab nodes (simulated Proxmox VE nodes over real SSH and HTTPS).

Use from a conftest: ``from tests.lab_fixtures import lab  # noqa: F401``. The session-scoped
``lab`` fixture starts three nodes on 127.77.X.1-3 (X: a block reserved per process) with their own state
directory, and gives tests
a :class:`LabHandle`: the inventory path, credentials, and SSH helpers (strict host keys,
TCP_NODELAY). The nodes die with the test process if it crashes; teardown runs ``lab down``.

Nodes: pve1 = PVE 8, systemd-boot (ZFS), AMD; pve2 = PVE 8, GRUB (LVM), Intel; pve3 = PVE 9,
systemd-boot, AMD.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import paramiko
import pytest

from gpuhost.lab import manager
from gpuhost.lab.layout import LabLayout
from gpuhost.lab.spec import NodeSpec

_RESERVATION: list[object] = []  # the open, locked file that reserves this process's address block


def _address_block() -> int:
    """Reserve a block of 20 /24s in 127.77.0.0/16 for this process (a flock held until exit), so
    concurrent test runs (xdist workers, another developer's pytest) never share addresses."""
    if not _RESERVATION:
        lock_dir = Path("/run/gpuhost-lab-tests")
        lock_dir.mkdir(mode=0o700, exist_ok=True)
        for base in range(0, 240, 20):
            fh = open(lock_dir / f"block-{base}.lock", "w")
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.close()
                continue
            _RESERVATION.extend([fh, base])
            break
        else:
            raise RuntimeError("no free lab address block in 127.77.0.0/16 (12 test runs at once?)")
    return int(_RESERVATION[1])  # type: ignore[call-overload]


def lab_address(subnet: int, host: int) -> str:
    """An address in this process's reserved block of 127.77.0.0/16 (subnet 0-19)."""
    assert 0 <= subnet < 20
    return f"127.77.{_address_block() + subnet}.{host}"


def reserved_address(network: int, subnet: int, host: int) -> str:
    """An address in this process's block of ``127.NETWORK.0.0/16`` (the same 20 /24s as :func:`lab_address`,
    in another /16): fixtures that hand out addresses of their own (plain sshd hosts, the provisioning labs)
    stay apart from another process's."""
    assert network in (81, 82) and 0 <= subnet < 20 and 0 < host < 255
    return f"127.{network}.{_address_block() + subnet}.{host}"


def lab_nodes() -> list[NodeSpec]:
    return [
        NodeSpec("pve1", lab_address(0, 1), boot="systemd-boot", cpu="amd", pve=8),
        NodeSpec("pve2", lab_address(0, 2), boot="grub", cpu="intel", pve=8),
        NodeSpec("pve3", lab_address(0, 3), boot="systemd-boot", cpu="amd", pve=9),
    ]


def require_lab_prerequisites() -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None or not Path("/usr/sbin/sshd").exists():
        pytest.fail("lab tests need root, unshare and openssh-server (apt-get install openssh-server)")


@dataclass
class CommandResult:
    rc: int
    stdout: str
    stderr: str


@dataclass
class LabHandle:
    state_dir: Path
    nodes: list[NodeSpec]
    _clients: dict[str, paramiko.SSHClient] = field(default_factory=dict)

    @property
    def layout(self) -> LabLayout:
        return LabLayout(self.state_dir)

    @property
    def inventory(self) -> Path:
        return self.layout.inventory_file

    @property
    def client_key(self) -> Path:
        return self.layout.client_key

    @property
    def known_hosts(self) -> Path:
        return self.layout.known_hosts

    @property
    def ca_file(self) -> Path:
        return self.layout.ca_cert

    def node(self, name: str) -> NodeSpec:
        return next(n for n in self.nodes if n.name == name)

    def token(self, name: str) -> str:
        return self.layout.token_file(name).read_text().strip()

    def root_password(self) -> str:
        return self.layout.root_password_file.read_text().strip()

    def connect(self, name: str, timeout: float = 10.0) -> paramiko.SSHClient:
        """A root SSH connection with strict host-key checking against the lab's known_hosts."""
        node = self.node(name)
        deadline = time.monotonic() + timeout
        while True:
            client = paramiko.SSHClient()
            client.load_host_keys(str(self.known_hosts))
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
            try:
                sock = socket.create_connection((node.address, 22), timeout=5)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                client.connect(
                    node.address,
                    22,
                    username="root",
                    key_filename=str(self.client_key),
                    look_for_keys=False,
                    allow_agent=False,
                    sock=sock,
                    timeout=5,
                )
                return client
            except (OSError, paramiko.SSHException):
                client.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def run(self, name: str, command: str, timeout: float = 30.0) -> CommandResult:
        """Run a command over a cached connection (reconnecting once if the node rebooted)."""
        for attempt in (1, 2):
            client = self._clients.get(name)
            if client is None or not (client.get_transport() and client.get_transport().is_active()):
                client = self._clients[name] = self.connect(name)
            try:
                return run_on(client, command, timeout)
            except (paramiko.SSHException, EOFError, OSError):
                self._clients.pop(name, None)
                client.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def boots(self, name: str) -> int:
        info = manager.status(self.state_dir)
        return int(next(n for n in info.nodes if n["name"] == name)["boots"])

    def wait_rebooted(self, name: str, boots_before: int, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = manager.status(self.state_dir)
            entry = next(n for n in info.nodes if n["name"] == name)
            if int(entry["boots"]) > boots_before and entry["running"] and not entry.get("rebooting"):
                self.connect(name).close()
                return
            time.sleep(0.05)
        raise TimeoutError(f"{name} did not come back from reboot within {timeout} s")


def run_on(client: paramiko.SSHClient, command: str, timeout: float = 30.0) -> CommandResult:
    stdin, stdout, stderr = client.exec_command(command, timeout=timeout)
    stdin.close()
    out = stdout.read().decode()
    err = stderr.read().decode()
    return CommandResult(stdout.channel.recv_exit_status(), out, err)


def start_lab(state_dir: Path, nodes: list[NodeSpec], seed_dirs: list[Path] | None = None) -> LabHandle:
    require_lab_prerequisites()
    manager.up(nodes, state_dir, seed_dirs=seed_dirs, tie_to_caller=True)
    return LabHandle(state_dir, nodes)


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabHandle]:
    """Three running lab nodes shared by the session (tests must not depend on each other's changes
    to the seed VM 100: create their own guests instead)."""
    state = tmp_path_factory.mktemp("lab") / "state"
    seed = Path(__file__).resolve().parent / "fixtures" / "pve" / "lab-seed"
    handle = start_lab(state, lab_nodes(), seed_dirs=[seed] if seed.is_dir() else None)
    try:
        yield handle
    finally:
        handle.close()
        manager.down(state)


SRC = str(Path(__file__).resolve().parents[1] / "src")

#: serving-test variables that keep the lab's stand-ins quick to judge (short polls and timeouts)
FAST_SERVING_VARS = {
    "sglang_ready_timeout": 120,
    "sglang_first_ready_timeout": 120,
    "sglang_capture_timeout": 30,
    "sglang_poll_interval": 0.3,
    "smg_ready_timeout": 60,
    "smg_poll_interval": 0.5,
}


def gpuhost_cli(
    inventory: Path, *args: str, timeout: float = 900, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``gpuhost ARGS -i INVENTORY`` as a user runs it (this checkout's ``src``), plain output, wide lines; ``env``:
    more of the environment."""
    env = {**os.environ, "PYTHONPATH": SRC, "COLUMNS": "200", "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "gpuhost", *args, "-i", str(inventory)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
