"""Facts about KVM guests of a node, read as root: the raw config file, the status, the kvm command line."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuhost.core.facts import Fact
from gpuhost.core.result import CommandResult
from gpuhost.errors import FactError
from gpuhost.facts import files
from gpuhost.facts.batch import parse_sections, sections_command
from gpuhost.facts.hardware import parse_nvidia_version
from gpuhost.pve import config as pveconf
from gpuhost.pve import vm_gpu


def vm_config_path(vmid: int) -> str:
    return f"/etc/pve/qemu-server/{int(vmid)}.conf"


def _vm_config(result: CommandResult, vmid: int) -> pveconf.GuestConfig | None:
    text = files.content.parse(result, vm_config_path(vmid))
    return None if text is None else pveconf.parse(text, "qemu")


vm_config: Fact[pveconf.GuestConfig | None] = Fact(
    "VM config", lambda vmid: files.content.command(vm_config_path(vmid)), _vm_config
)
"""The VM's configuration file as PVE keeps it (pending section and snapshots included); its digest
is the SHA1 of these bytes, as ``GET …/config`` reports it."""


def _vm_status(result: CommandResult, vmid: int) -> str | None:
    m = re.search(r"^status:\s*(\S+)", result.stdout, re.M)
    if result.exit_code == 0 and m:
        return m.group(1)
    if "does not exist" in result.stderr or "does not exist" in result.stdout:
        return None
    raise FactError(f"qm status {vmid} failed (exit {result.exit_code}): {result.stderr.strip()}")


vm_status: Fact[str | None] = Fact("VM status", lambda vmid: f"qm status {int(vmid)}", _vm_status)
"""'running', 'stopped', … or ``None`` when the VM does not exist."""


def _showcmd(result: CommandResult, vmid: int) -> vm_gpu.KvmCmdline:
    if result.exit_code != 0:
        raise FactError(f"qm showcmd {vmid} failed (exit {result.exit_code}): {result.stderr.strip()}")
    return vm_gpu.parse_showcmd(result.stdout)


vm_showcmd: Fact[vm_gpu.KvmCmdline] = Fact(
    "VM kvm command line", lambda vmid: f"qm showcmd {int(vmid)} --pretty", _showcmd
)
"""What ``qm showcmd`` says QEMU runs with (the current configuration, not the pending one)."""


def _numa_cmd(bdfs: tuple[str, ...]) -> str:
    import shlex

    quoted = " ".join(shlex.quote(b) for b in bdfs)
    node = "$(cat /sys/bus/pci/devices/$d/numa_node 2>/dev/null || echo -1)"
    return f'for d in {quoted}; do printf "%s %s\\n" "$d" "{node}"; done'


def _numa(result: CommandResult, bdfs: tuple[str, ...]) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in result.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


pci_numa_nodes: Fact[dict[str, int]] = Fact("PCI devices' NUMA nodes", _numa_cmd, _numa)
"""``/sys/bus/pci/devices/<bdf>/numa_node`` of each device (-1: the platform does not say)."""


@dataclass(frozen=True)
class GuestDriver:
    """Inside a VM guest: the loaded NVIDIA kernel module, nvidia-persistenced, the GPUs nvidia-smi lists."""

    module: str | None
    persistenced: str | None
    gpus: int


def _guest_driver_cmd() -> str:
    return sections_command(
        {
            "module": "cat /proc/driver/nvidia/version",
            "persistenced": "systemctl is-active nvidia-persistenced",
            "gpus": "nvidia-smi -L",
        }
    )


def _guest_driver(result: CommandResult) -> GuestDriver:
    s = parse_sections(result.stdout)
    loaded = parse_nvidia_version(s["module"].output) if "module" in s and s["module"].ok else None
    active = s["persistenced"].output.strip().splitlines() if "persistenced" in s else []
    listed = s["gpus"].output if "gpus" in s and s["gpus"].ok else ""
    return GuestDriver(loaded.version if loaded else None, active[-1] if active else None, listed.count("GPU "))


guest_driver: Fact[GuestDriver] = Fact("guest NVIDIA driver", _guest_driver_cmd, _guest_driver)
"""Read inside the guest (over its SSH connection), not on the node."""
