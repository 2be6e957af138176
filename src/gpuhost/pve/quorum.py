"""A PVE cluster's quorum, from ``pvecm status``, and whether a node may leave it for a reboot.

``pvecm status`` prints its own "Cluster information" part (PVE 6 and later) and then execs
``corosync-quorumtool -siH`` (proxmox/pve-cluster ``src/PVE/CLI/pvecm.pm``, ``status``). The parser is tested
on real captures (tests/fixtures/cluster/pvecm-status/, SOURCE.md there names each one's origin).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuhost.errors import OperationFailed


@dataclass(frozen=True)
class Member:
    """A row of ``pvecm status``'s membership list (``corosync-quorumtool -siH``)."""

    nodeid: int
    votes: int
    name: str
    local: bool
    qdevice: str | None = None  # the Qdevice column (A,V,NMW …) when the cluster has a QDevice


@dataclass(frozen=True)
class Quorum:
    nodes: int
    expected_votes: int
    total_votes: int
    quorum: int
    quorate: bool
    flags: tuple[str, ...]
    members: tuple[Member, ...]

    @property
    def local_votes(self) -> int | None:
        """This node's votes (the row marked ``(local)``); None when the list shows no such row."""
        return next((m.votes for m in self.members if m.local), None)

    @property
    def qdevice_votes(self) -> int:
        """The votes the QDevice casts now (its row: node id 0, named ``Qdevice``)."""
        return sum(m.votes for m in self.members if m.nodeid == 0)


_QDEVICE_FLAGS = re.compile(r"^(?:NR|N?A|N?V|N?MW)(?:,(?:NR|N?A|N?V|N?MW))*$")
_MEMBER = re.compile(r"^\s*(0x[0-9a-fA-F]+|\d+)\s+(\d+)\s+(.*?)\s*$")


def _members(text: str) -> tuple[Member, ...]:
    lines = text.splitlines()
    try:
        at = next(i for i, line in enumerate(lines) if line.strip() == "Membership information")
    except StopIteration:
        return ()
    out = []
    for line in lines[at + 1 :]:
        m = _MEMBER.match(line)
        if not m:
            continue
        rest = m[3]
        local = rest.endswith("(local)")
        if local:
            rest = rest[: -len("(local)")].rstrip()
        flags, _, name = rest.partition(" ")
        qdevice = flags if name and _QDEVICE_FLAGS.match(flags) else None
        out.append(Member(int(m[1], 0), int(m[2]), name.strip() if qdevice else rest, local, qdevice))
    return tuple(out)


def parse_pvecm_status(text: str) -> Quorum:
    """``pvecm status`` of a cluster member (its own lines, then ``corosync-quorumtool -siH``'s): the votequorum
    numbers, the flags and the members. PVE before 6 printed no "Cluster information" part; the votes column of a
    QDevice cluster comes with a Qdevice column; a node that is not quorate says ``Quorum: 2 Activity blocked``."""
    if "Quorum information" not in text:
        said = [line.strip() for line in text.splitlines() if line.strip()] or ["nothing"]
        if "is this node part of a cluster" in text:
            raise OperationFailed(f"pvecm status: not a cluster member ({said[0]})")
        raise OperationFailed(f"pvecm status printed no quorum information ({said[-1][:200]})")  # its error last

    def num(label: str) -> int:
        m = re.search(rf"^{label}:\s+(\d+)", text, re.M)
        if not m:
            raise OperationFailed(f"pvecm status without '{label}:'")
        return int(m.group(1))

    quorate = re.search(r"^Quorate:\s+(\w+)", text, re.M)
    flags = re.search(r"^Flags:(.*)$", text, re.M)
    return Quorum(
        nodes=num("Nodes"),
        expected_votes=num("Expected votes"),
        total_votes=num("Total votes"),
        quorum=num("Quorum"),
        quorate=bool(quorate and quorate.group(1) == "Yes"),
        flags=tuple(flags.group(1).split()) if flags else (),
        members=_members(text),
    )


def quorum_refusal(q: Quorum) -> str | None:
    """Why this node must not reboot now, from its ``pvecm status``; None when the others keep quorum without it.

    The votes left while it is down are the total less its own (a QDevice's vote stays with the others)."""
    if not q.quorate:
        return (
            f"the cluster is not quorate now ({q.total_votes} of {q.expected_votes} expected votes, {q.quorum} "
            "needed; pvecm status); no node is rebooted"
        )
    local = q.local_votes
    if local is None:
        return "pvecm status lists no row for this node (local); its votes are unknown"
    if q.total_votes - local < q.quorum:
        return (
            f"rebooting it would lose the cluster's quorum ({q.total_votes} of {q.expected_votes} expected votes "
            f"present, {local} of them this node's, {q.quorum} needed); bring the other nodes up first"
        )
    return None
