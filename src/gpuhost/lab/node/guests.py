"""Guest config files in /etc/pve: where they are, loading, locking and atomic saving."""

from __future__ import annotations

import fcntl
import os
import re
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from gpuhost.lab.node import pveconf
from gpuhost.lab.node.errors import PveError, param_error

Kind = Literal["qemu", "lxc"]
_DIRS = {"qemu": "qemu-server", "lxc": "lxc"}
LOCK_DIRS = {"qemu": "/run/lock/qemu-server", "lxc": "/run/lock/lxc"}


def nodename() -> str:
    return socket.gethostname().split(".")[0]


def conf_path(kind: Kind, vmid: int) -> str:
    return f"/etc/pve/nodes/{nodename()}/{_DIRS[kind]}/{vmid}.conf"


def parse_vmid(value: str) -> int:
    if not re.fullmatch(r"[1-9][0-9]{2,8}", str(value)):
        raise param_error(
            {
                "vmid": f"value '{value}' does not look like a valid VM ID"
                if not str(value).isdigit()
                else "invalid format - value must be >= 100"
            }
        )
    return int(value)


def exists(kind: Kind, vmid: int) -> bool:
    return os.path.exists(conf_path(kind, vmid))


def kind_of(vmid: int) -> Kind | None:
    kinds: tuple[Kind, ...] = ("qemu", "lxc")
    for kind in kinds:
        if exists(kind, vmid):
            return kind
    return None


def list_ids(kind: Kind) -> list[int]:
    d = os.path.dirname(conf_path(kind, 100))
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return []
    return sorted(int(n[:-5]) for n in names if re.fullmatch(r"\d+\.conf", n))


def load(kind: Kind, vmid: int) -> pveconf.GuestConfig:
    path = conf_path(kind, vmid)
    try:
        with open(path, encoding="utf-8") as fh:
            raw = fh.read()
    except FileNotFoundError:
        rel = path[len("/etc/pve/") :]
        # perl's die exits with errno when set: the failed open leaves ENOENT (2)
        raise PveError(f"Configuration file '{rel}' does not exist", exit_code=2, http_status=500) from None
    if kind == "lxc":
        for line in raw.splitlines():
            key = line.split(":", 1)[0].split("=", 1)[0].strip()
            if key.startswith("lxc.cgroup."):  # pve-container Config.pm:842-845, on every parse
                warn(f"vm {vmid} - {key} is deprecated, this will be a hard error in the future!")
    return pveconf.parse(raw, kind)


def save(kind: Kind, vmid: int, conf: pveconf.GuestConfig) -> None:
    path = conf_path(kind, vmid)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(conf.text())
    os.replace(tmp, path)


def create(kind: Kind, vmid: int, conf: pveconf.GuestConfig) -> None:
    other = kind_of(vmid)
    if other is not None:
        what = "VM" if other == "qemu" else "CT"
        raise PveError(
            f"unable to create {'VM' if kind == 'qemu' else 'CT'} {vmid}: config file already exists"
            if other == kind
            else f"{what} {vmid} already exists on node '{nodename()}'"
        )
    os.makedirs(os.path.dirname(conf_path(kind, vmid)), exist_ok=True)
    save(kind, vmid, conf)


def remove(kind: Kind, vmid: int) -> None:
    os.unlink(conf_path(kind, vmid))


@contextmanager
def locked(kind: Kind, vmid: int) -> Iterator[None]:
    """The per-guest config lock PVE takes around every change."""
    os.makedirs(LOCK_DIRS[kind], exist_ok=True)
    name = f"lock-{vmid}.conf" if kind == "qemu" else f"pve-config-{vmid}.lock"
    with open(os.path.join(LOCK_DIRS[kind], name), "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # pve-common Tools.pm:217-231 lock_file_full
            sys.stderr.write("trying to acquire lock...\n")
            sys.stderr.flush()
            fcntl.flock(fh, fcntl.LOCK_EX)
            sys.stderr.write(" OK\n")
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def check_digest(kind: Kind, conf: pveconf.GuestConfig, digest: str | None) -> None:
    """A stale ``digest``: pve-container's API2/LXC/Config.pm:176 calls pve-common Tools.pm
    ``assert_if_modified`` ("detected modified configuration - …"); qemu-server dies with its own
    text (API2/Qemu.pm:2211-2212)."""
    if digest and digest != conf.digest:
        if kind == "qemu":
            raise PveError("checksum mismatch (file change by other user?)")
        raise PveError("detected modified configuration - file changed by other user? Try again.")


def warn(message: str) -> None:
    """A Perl ``warn`` in a PVE code path: one line on the process's stderr (pvesh's, for the root
    route; pveproxy's log for the HTTP API)."""
    sys.stderr.write(message.rstrip("\n") + "\n")
    sys.stderr.flush()


def check_lock(conf: pveconf.GuestConfig, vmid: int, skiplock: bool) -> None:
    lock = conf.get("lock")
    if lock and not skiplock:
        raise PveError(f"VM is locked ({lock})")
