"""One running node: an ``unshare`` process whose child is the node's PID 1."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from gpuhost.lab import kernel_log
from gpuhost.lab.cpuinfo import rebadge
from gpuhost.lab.layout import LabLayout, NodeLayout, source_checkout
from gpuhost.lab.node import bootloader
from gpuhost.lab.node.namespaces import unshare_init
from gpuhost.lab.node.state import kernel_for
from gpuhost.lab.spec import NodeSpec

PR_SET_PDEATHSIG = 1
API_PORT = 8006
_libc = ctypes.CDLL("libc.so.6", use_errno=True)


def _die_with_parent() -> None:
    """Runs in the child before exec: if the supervisor dies, the kernel kills this unshare,
    whose --kill-child then kills the node's PID 1 and with it the whole namespace."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class NodeProcess:
    spec: NodeSpec
    lab: LabLayout
    proc: subprocess.Popen[bytes] | None = None
    boots: int = 0
    started_at: float = 0.0
    cmdline: str = ""
    history: list[str] = field(default_factory=list)

    @property
    def layout(self) -> NodeLayout:
        return self.lab.node(self.spec.name)

    def start(self) -> None:
        """Boot the node with the command line its bootloader would use now."""
        node = self.layout
        self.cmdline = bootloader.booted_cmdline(node.upper, self.spec.boot, kernel_for(self.spec.pve))
        node.cmdline_file.parent.mkdir(parents=True, exist_ok=True)
        node.cmdline_file.write_text(self.cmdline + "\n")
        (node.cmdline_file.parent / "cpuinfo").write_text(rebadge(Path("/proc/cpuinfo").read_text(), self.spec.cpu))
        (node.cmdline_file.parent / "boot_id").write_text(f"{uuid.uuid4()}\n")  # a new boot, a new boot_id
        kernel = kernel_for(self.spec.pve)
        version = (
            f"Linux version {kernel} (build@proxmox) (gcc (Debian 12.2.0-14) 12.2.0, GNU ld (GNU Binutils for "
            f"Debian) 2.40) #1 SMP PREEMPT_DYNAMIC PMX {kernel.removesuffix('-pve')} (2024-11-06T15:04Z)"
        )
        (node.cmdline_file.parent / "version").write_text(version + "\n")
        (node.cmdline_file.parent / "dmesg").write_text(kernel_log.render(kernel, version, self.cmdline, self.spec.cpu))
        console = open(node.console_log, "ab")
        try:
            self.proc = subprocess.Popen(
                [
                    *unshare_init(ipc=False),
                    str(self.lab.boot_script),
                    self.spec.name,
                    str(node.dir),
                    str(self.lab.root),
                    self.spec.boot,
                    str(source_checkout() or ""),
                ],
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=console,
                close_fds=True,
                preexec_fn=_die_with_parent,
            )
        finally:
            console.close()
        self.boots += 1
        self.started_at = time.time()
        self.history.append(self.cmdline)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def init_pid(self) -> int | None:
        """The node's PID 1 as the host sees it (the child of unshare)."""
        if self.proc is None:
            return None
        try:
            children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
        except OSError:
            return None
        return int(children[0]) if children else None

    def stop(self, timeout: float = 10.0) -> None:
        """Kill the node's PID namespace and wait until unshare has reaped it.

        SIGKILL to PID 1 makes the kernel kill every process of the namespace; the mount namespace,
        with the overlay and every mount inside, goes away with its last process."""
        if self.proc is None:
            return
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            pid = self.init_pid()
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                self.proc.wait(0.05)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            self.proc.kill()  # unshare itself; --kill-child takes the namespace with it
            self.proc.wait(5)
        self.proc = None

    def ready(self) -> bool:
        if self.spec.guest_of:  # a VM's guest: SSH only, no PVE API
            return _ssh_banner(self.spec.address)
        return _ssh_banner(self.spec.address) and _port_open(self.spec.address, API_PORT)


def _ssh_banner(address: str) -> bool:
    try:
        with socket.create_connection((address, 22), timeout=0.3) as sock:
            return sock.recv(4) == b"SSH-"
    except OSError:
        return False


def _port_open(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=0.3):
            return True
    except OSError:
        return False
