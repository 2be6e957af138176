"""A node's IOMMU groups as data: which PCI functions share a group, and the group's number.

The node description's ``gpu`` entry carries them (``iommu_groups``: ``[{"group": n, "devices": [bdf, ...]}]``),
so a node's groups come from where its shape came from: the lab's rule for a node started from flags, the
host's own ``/sys/kernel/iommu_groups`` listing for a replica of a captured host. The kernel makes one
``/sys/kernel/iommu_groups/<n>/devices/<bdf>`` link per function it adds to a group (torvalds/linux
``drivers/iommu/iommu.c`` ``iommu_group_add_device()``: ``sysfs_create_link_nowarn(group->devices_kobj, ...,
device->name)``) and logs "Adding to iommu group <n>" (``__iommu_probe_device()`` / ``iommu_group_add_device()``
``dev_info``). Stdlib only: the node side imports it.
"""

from __future__ import annotations

import re

#: the first group number the lab's rule gives (a real host's lower groups hold its chipset functions)
RULE_BASE = 20

_BDF = r"(?P<bdf>(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])"
#: ``find /sys/kernel/iommu_groups ...``: one link per function
_LINK = re.compile(r"^/sys/kernel/iommu_groups/(?P<n>\d+)/devices/" + _BDF + r"$")
#: the listing scripts' flat form (``printf 'IOMMU Group %s ' "$n"; lspci -nns "${d##*/}"``, the Arch wiki's and
#: Proxmox guides' loop): "IOMMU Group 29 0000:11:00.0 3D controller [0302]: ..."
_FLAT = re.compile(r"^IOMMU Group (?P<n>\d+) " + _BDF + r" ")
#: their grouped form: "IOMMU Group 30:" then each function's ``lspci -nns`` line, indented
_HEADER = re.compile(r"^IOMMU Group (?P<n>\d+):\s*$")
_MEMBER = re.compile(r"^\s+" + _BDF + r" ")


def by_rule(gpus: list[dict[str, object]], base: int = RULE_BASE) -> list[dict[str, object]]:
    """The lab's rule for a node built from flags: each root port, switch port and GPU its own group (every
    bridge with ACS, as the lab's lspci shows them), numbered from ``base`` in bus order."""
    devices: set[str] = set()
    for g in gpus:
        bridges = g.get("bridges", [])
        devices.update(str(b) for b in (bridges if isinstance(bridges, list) else []))
        devices.add(str(g["bdf"]))
    return [{"group": n, "devices": [bdf]} for n, bdf in enumerate(sorted(devices), start=base)]


def from_listing(text: str) -> list[dict[str, object]]:
    """The groups of a listing of /sys/kernel/iommu_groups: ``find ... -type l`` (or ``-mindepth 3``) lines, or
    the listing scripts' flat or grouped ``IOMMU Group N`` forms; one entry per function, in any order; other
    lines (a prompt, the command, an error) are skipped. A function without a domain is in domain 0000. Groups
    in number order, each group's functions in bus order."""
    groups: dict[int, set[str]] = {}
    current: int | None = None  # the grouped form's group, while its indented lines follow
    for raw in text.splitlines():
        line = raw.rstrip("\r")
        if header := _HEADER.match(line):
            current = int(header["n"])
            continue
        if found := _LINK.match(line.strip()) or _FLAT.match(line):
            n, bdf = int(found["n"]), found["bdf"]
        elif current is not None and (member := _MEMBER.match(line)):
            n, bdf = current, member["bdf"]
        else:
            if not line.startswith((" ", "\t")):
                current = None
            continue
        bdf = bdf.lower()
        groups.setdefault(n, set()).add(bdf if bdf.count(":") == 2 else f"0000:{bdf}")
    return [{"group": n, "devices": sorted(groups[n])} for n in sorted(groups)]


def members(groups: list[dict[str, object]]) -> list[tuple[str, int]]:
    """(function, group) for every function of ``groups``, in bus order (the order the lab logs them in)."""
    out: list[tuple[str, int]] = []
    for g in groups:
        devices = g.get("devices", [])
        out.extend((str(d), int(str(g["group"]))) for d in (devices if isinstance(devices, list) else []))
    return sorted(out)
