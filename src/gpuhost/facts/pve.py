"""Facts about Proxmox VE itself and its guests, read as root on the node."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass

from gpuhost.connection.base import Connection
from gpuhost.errors import FactError
from gpuhost.pve import config as pveconf


@dataclass(frozen=True, order=True)
class PveVersion:
    major: int
    minor: int
    patch: int = 0

    def at_least(self, major: int, minor: int) -> bool:
        return (self.major, self.minor) >= (major, minor)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


def parse_pveversion(text: str) -> PveVersion | None:
    """``pve-manager/8.3.0/c1689ccb1065a83b (running kernel: …)`` → 8.3.0 (also the old ``7.4-3`` form)."""
    m = re.search(r"pve-manager/(\d+)\.(\d+)(?:[.-](\d+))?", text)
    if not m:
        return None
    return PveVersion(int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))


def pve_version(conn: Connection) -> PveVersion:
    result = conn.run("pveversion", check=False)
    version = parse_pveversion(result.stdout)
    if version is None:
        raise FactError(f"{conn.name}: not a Proxmox VE node (pveversion: "
                        f"{(result.stdout or result.stderr).strip()[:120] or 'not found'})")
    return version


def node_name(conn: Connection) -> str:
    """The node's name in PVE (its short host name), as API paths need it."""
    return conn.run("hostname").stdout.strip().split(".")[0]


def ct_config_path(ctid: int) -> str:
    return f"/etc/pve/lxc/{ctid}.conf"


def ct_config(conn: Connection, ctid: int) -> pveconf.GuestConfig | None:
    """The container's configuration file as PVE keeps it (raw ``lxc.*`` keys included)."""
    text = conn.read_file(ct_config_path(ctid))
    return None if text is None else pveconf.parse(text, "lxc")


def ct_status(conn: Connection, ctid: int) -> str | None:
    """'running', 'stopped', … or ``None`` when the container does not exist."""
    result = conn.run(f"pct status {ctid}", check=False)
    m = re.search(r"^status:\s*(\S+)", result.stdout, re.M)
    if result.exit_code == 0 and m:
        return m.group(1)
    if "does not exist" in result.stderr or "does not exist" in result.stdout:
        return None
    raise FactError(f"{conn.name}: pct status {ctid} failed (exit {result.exit_code}): {result.stderr.strip()}")


def vztemplates(conn: Connection, storage: str) -> list[str]:
    """Container templates (volume ids) on ``storage`` of this node."""
    cmd = (f"pvesh get /nodes/$(hostname)/storage/{shlex.quote(storage)}/content --content vztmpl "
           "--output-format json")
    result = conn.run(cmd)
    try:
        items = json.loads(result.stdout or "[]")
    except json.JSONDecodeError:
        raise FactError(f"{conn.name}: unexpected output from {cmd}: {result.stdout[:200]}") from None
    return sorted(i["volid"] for i in items if i.get("content", "vztmpl") == "vztmpl" and "volid" in i)
