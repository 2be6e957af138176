"""Host PCI devices as PVE looks them up (sysfs; later parts put simulated GPUs there)."""

from __future__ import annotations

import glob
import os

SYSFS_PCI = "/sys/bus/pci/devices"


def full_id(pci_id: str) -> str:
    """``01:00.0`` -> ``0000:01:00.0`` (the domain is optional in configs)."""
    return pci_id if pci_id.count(":") == 2 else f"0000:{pci_id}"


def functions(pci_id: str) -> list[str]:
    """The functions a hostpci entry passes: itself when it names a function, else every function
    of the slot that exists on the host (empty if none)."""
    fid = full_id(pci_id).lower()
    if "." in fid.rsplit(":", 1)[-1]:
        return [fid] if os.path.exists(os.path.join(SYSFS_PCI, fid)) else []
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(SYSFS_PCI, fid + ".*")))
