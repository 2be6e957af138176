"""Guest config files in /etc/pve: where they are, loading, locking and atomic saving."""

from __future__ import annotations

import fcntl
import os
import re
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from gpuhost.lab.node.errors import PveError, param_error
from gpuhost.pve import config as pveconf

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
    for kind in ("qemu", "lxc"):
        if exists(kind, vmid):  # type: ignore[arg-type]
            return kind  # type: ignore[return-value]
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
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def check_digest(conf: pveconf.GuestConfig, digest: str | None) -> None:
    if digest and digest != conf.digest:
        raise PveError("detected modified configuration - file changed by other user? Try again.")


def check_lock(conf: pveconf.GuestConfig, vmid: int, skiplock: bool) -> None:
    lock = conf.get("lock")
    if lock and not skiplock:
        raise PveError(f"VM is locked ({lock})")
