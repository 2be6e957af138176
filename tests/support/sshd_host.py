"""A throwaway host for integration tests: a real OpenSSH sshd on a loopback address.

The host runs in private mount, UTS and PID namespaces with a copy-on-write overlay of
this machine's root as its ``/``, so tests may edit ``/etc`` freely without touching the
machine. Requires root (CI runs as root). See shared/reference/lab-harness.md.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

_INNER = r"""
set -eu
name=$1 addr=$2 base=$3
listen=$addr; case $addr in *:*) listen="[$addr]";; esac
R=$base/root O=$base/ovl
mkdir -p "$R" "$O"
# upper layer on disk, so tests can inspect what the host wrote
mkdir -p "$O/upper" "$O/work"
mount -t overlay "ghroot-$name" -o "lowerdir=/,upperdir=$O/upper,workdir=$O/work" "$R"
mount -t proc proc "$R/proc"
mount --rbind /sys "$R/sys"; mount --make-rslave "$R/sys"
mount --rbind /dev "$R/dev"; mount --make-rslave "$R/dev"
mount -t tmpfs -o mode=0755 run "$R/run"
mount -t tmpfs -o mode=1777 tmp "$R/tmp"
[ -d "$R/work" ] && mount -t tmpfs -o mode=0755 hide "$R/work"
[ -d "$R/farm" ] && mount -t tmpfs -o mode=0755 hide "$R/farm"
echo "$name" > "$R/etc/hostname"; hostname "$name"
mkdir -p "$R/run/sshd"
mount -t tmpfs -o mode=0700 home "$R/root"   # a clean /root (the machine's holds pyenv etc.)
mkdir -m 700 "$R/root/.ssh"
cp /etc/skel/.bashrc /etc/skel/.profile "$R/root/"
install -m 600 "$base/client_key.pub" "$R/root/.ssh/authorized_keys"
rm -f "$R"/etc/ssh/ssh_host_*
install -m 600 "$base/host_key" "$R/etc/ssh/ssh_host_ed25519_key"
cat > "$R/etc/ssh/sshd_config.d/test.conf" <<CFG
ListenAddress $listen:22
HostKey /etc/ssh/ssh_host_ed25519_key
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
MaxSessions 100
MaxStartups 100:30:200
UseDNS no
CFG
cd "$R"; mkdir -p .oldroot; pivot_root . .oldroot; umount -l /.oldroot; rmdir /.oldroot
exec /usr/sbin/sshd -D -e -E /var/log/sshd-test.log
"""

_libc = ctypes.CDLL("libc.so.6", use_errno=True)
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gpuhost-test", "-f", str(path)], check=True)


@dataclass
class SshdHost:
    """One running test host. ``known_hosts`` trusts exactly its host key."""

    name: str
    address: str
    base: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def client_key(self) -> Path:
        return self.base / "client_key"

    @property
    def known_hosts(self) -> Path:
        return self.base / "known_hosts"

    @property
    def host_key_pub(self) -> str:
        return (self.base / "host_key.pub").read_text().split()[1]

    def upper(self, path: str) -> Path:
        """Where a file the host wrote lands (the overlay's upper layer)."""
        return self.base / "ovl" / "upper" / path.lstrip("/")

    def start(self, timeout: float = 10.0) -> SshdHost:
        self.base.mkdir(mode=0o700, parents=True, exist_ok=True)
        for key in ("client_key", "host_key"):
            if not (self.base / key).exists():
                _keygen(self.base / key)
        self.known_hosts.write_text(f"{self.address} ssh-ed25519 {self.host_key_pub}\n")
        self.proc = subprocess.Popen(
            [
                "unshare",
                "-m",
                "-u",
                "-p",
                "--fork",
                "--kill-child=SIGKILL",
                "--propagation",
                "private",
                "sh",
                "-c",
                _INNER,
                "inner",
                self.name,
                self.address,
                str(self.base),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=_die_with_parent,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise RuntimeError(f"test sshd {self.name} exited: {err}")
            try:
                with socket.create_connection((self.address, 22), timeout=0.2) as s:
                    if s.recv(4) == b"SSH-":
                        return self
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise TimeoutError(f"test sshd {self.name} not ready on {self.address}:22")

    def processes(self) -> list[int]:
        """Every process of the host (its namespace's init, sshd, sessions), not the unshare parent."""
        assert self.proc is not None
        todo, found = [self.proc.pid], []
        while todo:
            pid = todo.pop()
            try:
                for task in Path(f"/proc/{pid}/task").iterdir():
                    kids = [int(k) for k in (task / "children").read_text().split()]
                    found += kids
                    todo += kids
            except OSError:
                continue
        return found

    def freeze(self) -> None:
        """SIGSTOP every process of the host: its TCP sockets stay open (the kernel still ACKs),
        but nothing answers, like a hung machine."""
        for pid in self.processes():
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                pass

    def thaw(self) -> None:
        for pid in self.processes():
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    def stop(self) -> None:
        if self.proc is None:
            return
        pid = self.proc.pid
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            children = []
        for child in children:  # the namespace's init; its death ends the namespaces
            try:
                os.kill(int(child), signal.SIGTERM)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.proc = None


def make_host(name: str, address: str) -> SshdHost:
    base = Path(tempfile.mkdtemp(prefix=f"gpuhost-test-{name}-", dir="/run"))
    os.chmod(base, 0o700)
    return SshdHost(name=name, address=address, base=base)


def remove(host: SshdHost) -> None:
    host.stop()
    shutil.rmtree(host.base, ignore_errors=True)
