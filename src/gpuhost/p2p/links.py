"""Link types as ``nvidia-smi topo -m`` names them, and the path a peer copy takes over each.

``NV#`` is a bonded set of # NVLinks; the others are PCIe paths, nearest first: ``PIX``
(at most one PCIe bridge), ``PXB`` (several bridges, no host bridge), ``PHB`` (through a
PCIe host bridge, usually the CPU), ``NODE`` (between host bridges of one NUMA node) and
``SYS`` (across the inter-socket link). Older drivers print ``SOC`` for ``SYS``.
"""

from __future__ import annotations

import re

PCIE_LINKS = ("PIX", "PXB", "PHB", "NODE", "SYS", "SOC")
_NV = re.compile(r"^NV(\d+)$")

PATHS = {
    "PIX": "PCIe through at most one PCIe switch: the best PCIe peer path",
    "PXB": "PCIe through several PCIe bridges without the host bridge",
    "PHB": "PCIe through the CPU's host bridge (the root complex must forward peer traffic)",
    "NODE": "PCIe between host bridges of one NUMA node",
    "SYS": "PCIe across the CPU sockets' interconnect (QPI/UPI/xGMI): P2P is often refused or slow there",
    "SOC": "PCIe across the CPU sockets' interconnect (QPI/UPI/xGMI): P2P is often refused or slow there",
}


def nvlink_count(link: str | None) -> int:
    """``NV18`` -> 18; anything else -> 0."""
    m = _NV.match(link or "")
    return int(m.group(1)) if m else 0


def is_link(cell: str) -> bool:
    return cell in PCIE_LINKS or bool(_NV.match(cell))


def link_kind(link: str | None) -> str | None:
    """ "nvlink", "pcie", or None when the link is not known."""
    if nvlink_count(link):
        return "nvlink"
    if link in PCIE_LINKS:
        return "pcie"
    return None


def describe_path(link: str | None) -> str:
    """What a peer copy over this link goes through, in words."""
    n = nvlink_count(link)
    if n:
        return f"NVLink, {n} bonded links: peer copies never touch PCIe"
    return PATHS.get(link or "", "unknown link")
