"""What a capture reads: each bundle file and the read-only command that produces it.

Every command only reads. Nothing under ``/etc/pve/priv``, no SSH keys, no token files are named here:
guest configs are read one directory at a time, never recursively.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuhost.facts.boot import GRUB_DEFAULT, GRUB_DROPIN_DIR, KERNEL_CMDLINE
from gpuhost.facts.host import HOST_PROBES

#: the line that starts each file of a multi-file probe (followed by the file's path on the host)
FILE_MARK = "@@gpuhost-file@@"


@dataclass(frozen=True)
class Probe:
    path: str  # where its output lands in the bundle; for a multi-file probe, the folder
    command: str
    many: bool = False  # one bundle file per host file (framed by FILE_MARK)


def _cat_each(pattern: str) -> str:
    """Every regular file matching ``pattern`` (one directory, no recursion), each framed by FILE_MARK."""
    return f'for f in {pattern}; do [ -f "$f" ] && [ ! -L "$f" ] || continue; echo "{FILE_MARK} $f"; cat -- "$f"; done'


#: ``gpuhost facts`` reads these (gpuhost.facts.host.HOST_PROBES and the summary's own): kept verbatim under
#: ``facts/`` so a bundle answers every question the product asks a node.
FACT_PROBES: tuple[Probe, ...] = (
    *(Probe(f"facts/{key}", cmd) for key, cmd in HOST_PROBES.items()),
    Probe("facts/hostname", "hostname"),
    Probe("facts/os_release", "cat /etc/os-release"),
    Probe("facts/arch", "uname -m"),
)

PROBES: tuple[Probe, ...] = (
    *FACT_PROBES,
    # PCI devices, IOMMU groups, NUMA
    Probe("cmd/lspci-nnvv", "lspci -D -nnvv"),
    Probe("cmd/lspci-nnk", "lspci -D -nnk"),
    Probe("cmd/pci-device-paths", 'for d in /sys/bus/pci/devices/*; do readlink -f "$d"; done'),
    Probe("cmd/iommu-groups", "find /sys/kernel/iommu_groups -mindepth 3 -maxdepth 3"),
    Probe("cmd/lscpu", "lscpu"),
    Probe("cmd/numa-nodes", "cat /sys/devices/system/node/online"),
    Probe("cmd/numactl-H", "numactl -H"),
    # GPUs
    Probe("cmd/nvidia-smi-q", "nvidia-smi -q"),
    Probe("cmd/nvidia-smi-topo-m", "nvidia-smi topo -m"),
    Probe("cmd/nvidia-smi-topo-p2p-r", "nvidia-smi topo -p2p r"),
    Probe("cmd/nvidia-smi-topo-p2p-w", "nvidia-smi topo -p2p w"),
    Probe("cmd/nvidia-smi-topo-p2p-n", "nvidia-smi topo -p2p n"),
    # boot loader and its files
    Probe("cmd/proxmox-boot-tool-status", "proxmox-boot-tool status 2>&1"),
    Probe("fs/etc/kernel/cmdline", f"cat {KERNEL_CMDLINE}"),
    Probe("fs/etc/default/grub", f"cat {GRUB_DEFAULT}"),
    Probe("fs/etc/default/grub.d", _cat_each(f"{GRUB_DROPIN_DIR}/*.cfg"), many=True),
    Probe("fs/proc/cmdline", "cat /proc/cmdline"),
    Probe("cmd/dmesg-iommu-vfio", "dmesg | grep -iE 'iommu|AMD-Vi|DMAR|vfio|NVRM'"),
    # modules
    Probe("fs/proc/modules", "cat /proc/modules"),
    Probe("fs/etc/modules", "cat /etc/modules"),
    Probe("fs/etc/modprobe.d", _cat_each("/etc/modprobe.d/*.conf"), many=True),
    Probe("fs/etc/modules-load.d", _cat_each("/etc/modules-load.d/*.conf"), many=True),
    # driver and packages
    Probe("fs/proc/driver/nvidia/version", "cat /proc/driver/nvidia/version"),
    Probe("cmd/modinfo-nvidia", "modinfo nvidia"),
    Probe("cmd/pveversion-v", "pveversion -v"),
    Probe(
        "cmd/dpkg-nvidia-pve-kernel",
        "dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n' "
        "| grep -E '^(nvidia|libnvidia|cuda|pve|proxmox|linux-image|pve-kernel|proxmox-kernel)'",
    ),
    # guests
    Probe("fs/etc/pve/lxc", _cat_each("/etc/pve/lxc/*.conf"), many=True),
    Probe("fs/etc/pve/qemu-server", _cat_each("/etc/pve/qemu-server/*.conf"), many=True),
    # storage
    Probe("cmd/pvesm-status", "pvesm status"),
    Probe("fs/etc/pve/storage.cfg", "cat /etc/pve/storage.cfg"),
    # cluster and HA
    Probe("cmd/pvecm-status", "pvecm status"),
    Probe("cmd/pvecm-nodes", "pvecm nodes"),
    Probe("fs/etc/pve/.members", "cat /etc/pve/.members"),
    Probe("fs/etc/pve/corosync.conf", "cat /etc/pve/corosync.conf"),
    Probe("cmd/ha-manager-status", "ha-manager status"),
    Probe("fs/etc/pve/ha/resources.cfg", "cat /etc/pve/ha/resources.cfg"),
    # names the anonymiser replaces (read here, so it knows them)
    Probe("cmd/hostname-f", "hostname -f"),
)
