"""The state snapshot ``--drift`` compares against: versions, command lines and container configs of a node, with
each container's NVIDIA userspace, in one round trip (the containers' listings run through ``pct exec`` inside the
node's batch)."""

from __future__ import annotations

import shlex

from gpuhost.core.facts import Fact
from gpuhost.core.result import CommandResult
from gpuhost.facts.batch import parse_sections, sections_command
from gpuhost.facts.boot import GRUB_DEFAULT, KERNEL_CMDLINE
from gpuhost.facts.nvidia import USERSPACE_LISTING, parse_nvml_library_versions

NODE_PROBES = {
    "kernel": "uname -r",
    "pve": "pveversion",
    "nvidia module": "cat /proc/driver/nvidia/version 2>/dev/null | head -1",
    "/proc/cmdline": "cat /proc/cmdline",
    KERNEL_CMDLINE: f"cat {KERNEL_CMDLINE}",
    GRUB_DEFAULT: f"grep -E '^GRUB_CMDLINE' {GRUB_DEFAULT}",
}


def _probes(ctids: tuple[int, ...]) -> dict[str, str]:
    probes = dict(NODE_PROBES)
    for c in ctids:
        # the digest line changes on every write; it is not part of what a user configured
        probes[f"CT {c} config"] = f"grep -v '^digest:' /etc/pve/lxc/{int(c)}.conf"
        probes[f"CT {c} NVIDIA userspace"] = f"pct exec {int(c)} -- sh -c {shlex.quote(USERSPACE_LISTING)}"
    return probes


def _command(*ctids: int) -> str:
    return sections_command(_probes(tuple(ctids)))


def parse_snapshot(result: CommandResult, *ctids: int) -> dict[str, str]:
    """Each probe that succeeded, its output stripped; a container's userspace as its first NVML library version."""
    out: dict[str, str] = {}
    for key, section in parse_sections(result.stdout).items():
        if not section.ok:
            continue
        if key.endswith(" NVIDIA userspace"):
            versions = parse_nvml_library_versions(section.output)
            if versions:
                out[key] = versions[0]
        else:
            out[key] = section.output.strip()
    return out


#: args: the node's container ids
state_snapshot: Fact[dict[str, str]] = Fact("state snapshot", _command, parse_snapshot)
