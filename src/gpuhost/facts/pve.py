"""Facts about Proxmox VE itself and its guests, read as root on the node."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass

from gpuhost.core.facts import Fact, fact
from gpuhost.core.result import CommandResult
from gpuhost.errors import FactError
from gpuhost.facts import files
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


@fact("PVE version", "pveversion")
def pve_version(result: CommandResult) -> PveVersion:
    version = parse_pveversion(result.stdout)
    if version is None:
        raise FactError(
            f"not a Proxmox VE node (pveversion: {(result.stdout or result.stderr).strip()[:120] or 'not found'})"
        )
    return version


@fact("PVE node name", "hostname")
def node_name(result: CommandResult) -> str:
    """The node's name in PVE (its short host name), as API paths need it."""
    return result.stdout.strip().split(".")[0]


def ct_config_path(ctid: int) -> str:
    return f"/etc/pve/lxc/{ctid}.conf"


def _ct_config(result: CommandResult, ctid: int) -> pveconf.GuestConfig | None:
    text = files.content.parse(result, ct_config_path(ctid))
    return None if text is None else pveconf.parse(text, "lxc")


ct_config: Fact[pveconf.GuestConfig | None] = Fact(
    "CT config", lambda ctid: files.content.command(ct_config_path(ctid)), _ct_config
)
"""The container's configuration file as PVE keeps it (raw ``lxc.*`` keys included)."""


def _ct_status(result: CommandResult, ctid: int) -> str | None:
    m = re.search(r"^status:\s*(\S+)", result.stdout, re.M)
    if result.exit_code == 0 and m:
        return m.group(1)
    if "does not exist" in result.stderr or "does not exist" in result.stdout:
        return None
    raise FactError(f"pct status {ctid} failed (exit {result.exit_code}): {result.stderr.strip()}")


ct_status: Fact[str | None] = Fact("CT status", lambda ctid: f"pct status {int(ctid)}", _ct_status)
"""'running', 'stopped', … or ``None`` when the container does not exist."""


def _templates_cmd(storage: str) -> str:
    return f"pvesh get /nodes/$(hostname)/storage/{shlex.quote(storage)}/content --content vztmpl --output-format json"


def _templates(result: CommandResult, storage: str) -> list[str]:
    if result.exit_code != 0:
        raise FactError(f"cannot list templates on storage '{storage}': {result.stderr.strip()}")
    try:
        items = json.loads(result.stdout or "[]")
    except json.JSONDecodeError:
        raise FactError(f"unexpected output listing templates: {result.stdout[:200]}") from None
    return sorted(i["volid"] for i in items if i.get("content", "vztmpl") == "vztmpl" and "volid" in i)


vztemplates: Fact[list[str]] = Fact("container templates", _templates_cmd, _templates)
"""Container templates (volume ids) on ``storage`` of this node."""
