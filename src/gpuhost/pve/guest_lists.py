"""The guests a node runs, from ``pct list`` and ``qm list`` (those that go down with the node when it reboots).

The parsers read the texts of PVE's own commands; they are tested on real captures (tests/fixtures/cluster/,
SOURCE.md there names each one's origin).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class GuestLine:
    kind: str  # "CT" or "VM"
    id: int
    name: str
    status: str = "running"

    def __str__(self) -> str:
        shown = ", ".join(x for x in (self.name, "" if self.status == "running" else self.status) if x)
        return f"{self.kind} {self.id} ({shown})" if shown else f"{self.kind} {self.id}"


#: where ``pct list``'s Lock column starts: ``printf "%-10s %-10s %-12s %-20s"`` (pve-container's pct.pm)
_PCT_LOCK_AT = 22


@dataclass(frozen=True)
class PctRow:
    vmid: int
    status: str
    lock: str
    name: str


def pct_rows(text: str) -> list[PctRow]:
    """The rows of ``pct list``: VMID, Status, Lock and Name (``%-10s %-10s %-12s %-20s``). Lock is mostly blank,
    and a lock longer than its column (``snapshot-delete``) pushes the name to the right. On a node without
    containers it prints nothing, not even the header."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 2 or not parts[0].isdigit():
            continue
        rest, lock = line[_PCT_LOCK_AT:], ""
        if rest[:1].strip():  # a lock; the name follows it
            lock, _, rest = rest.partition(" ")
        out.append(PctRow(int(parts[0]), parts[1], lock, rest.strip()))
    return out


def parse_pct_list(text: str) -> list[GuestLine]:
    """The containers of ``pct list`` that go down with the node: every one not ``stopped``."""
    return [GuestLine("CT", r.vmid, r.name, r.status) for r in pct_rows(text) if r.status != "stopped"]


@dataclass(frozen=True)
class QmRow:
    vmid: int
    name: str
    status: str
    mem_mb: float
    bootdisk_gb: float
    pid: int


#: a row of ``qm list`` (``printf "%10s %-20s %-10s %-10s %12.2f %-10s"``, qemu-server's qm.pm), read from the
#: right: a name longer than 20 characters pushes the columns after it, and a VM without a name is "VM <vmid>"
_QM_ROW = re.compile(r"^\s*(\d+) (.*?)\s+(\S+)\s+(\d+(?:\.\d+)?)\s+(\d+\.\d\d)\s+(\d+)\s*$")


def qm_rows(text: str) -> list[QmRow]:
    """The rows of ``qm list`` (VMID NAME STATUS MEM(MB) BOOTDISK(GB) PID); nothing on a node without VMs."""
    out = []
    for line in text.splitlines():
        m = _QM_ROW.match(line)
        if m:
            out.append(QmRow(int(m[1]), m[2].strip(), m[3], float(m[4]), float(m[5]), int(m[6])))
    return out


def parse_qm_list(text: str) -> list[GuestLine]:
    """The VMs of ``qm list`` that go down with the node: every one not ``stopped`` (running, paused, …)."""
    return [GuestLine("VM", r.vmid, r.name, r.status) for r in qm_rows(text) if r.status != "stopped"]
