"""Line rates and the limits the judge holds measurements to.

Rates are per direction, GB = 1e9 bytes, like the tools whose output we read.
Why each limit sits where it does is in docs/verify-p2p.md; the short version:

* a healthy PCIe P2P copy reaches 85-90 % of the line rate (Gen5 x16: 53-56.6 of 63 GB/s
  on RTX PRO 6000 boxes; Gen4 x16: 25-27 of 31.5), cross-socket pairs less (39-51);
* NVLink copy-engine writes reach 80-88 % (H100: 371-377 of 450; H200: 394 of 450);
* a 16-byte copy takes 0.4-2.3 us over a working peer path and 10-25 us when it
  is staged through host memory, on every PCIe generation. Bandwidth alone cannot
  tell the two apart on Gen5 (staged still gives ~43 GB/s), latency can.
"""

from __future__ import annotations

from dataclasses import dataclass

#: PCIe generation -> GB/s per lane and direction (after line encoding).
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}

#: Compute capability -> GB/s per NVLink link and direction.
NVLINK_LINK_GBPS = {"6.0": 20.0, "7.0": 25.0, "8.0": 25.0, "8.6": 14.0625, "9.0": 25.0, "10.0": 50.0}

#: Above this, a peer copy cannot have gone over PCIe (Gen5 x16 tops out at 63 GB/s).
BEYOND_PCIE_GBPS = 64.0


def pcie_rate(gen: int | None, width: int | None) -> float | None:
    if gen is None or width is None or gen not in PCIE_LANE_GBPS or width <= 0:
        return None
    return PCIE_LANE_GBPS[gen] * width


#: GPU name fragment -> compute capability, for captures that give names only (nvbandwidth, topo -m).
_CC_BY_NAME = (
    ("GB200", "10.0"),
    ("B200", "10.0"),
    ("H100", "9.0"),
    ("H200", "9.0"),
    ("H800", "9.0"),
    ("H20", "9.0"),
    ("GH200", "9.0"),
    ("A100", "8.0"),
    ("A800", "8.0"),
    ("A30", "8.0"),
    ("V100", "7.0"),
    ("P100", "6.0"),
    ("A6000", "8.6"),
    ("RTX 3090", "8.6"),
    ("A40", "8.6"),
)


def compute_capability_from_name(name: str | None) -> str | None:
    return next((cc for frag, cc in _CC_BY_NAME if name and frag in name), None)


def nvlink_rate(compute_capability: str | None, links: int) -> float | None:
    if compute_capability is None or links <= 0:
        return None
    per_link = NVLINK_LINK_GBPS.get(compute_capability)
    return per_link * links if per_link is not None else None


@dataclass(frozen=True)
class Band:
    """``ratio >= pass_at`` passes, ``>= warn_at`` warns, below fails."""

    pass_at: float
    warn_at: float


# Unidirectional peer bandwidth as a share of the line rate.
UNI_PCIE_NEAR = Band(0.80, 0.55)  # same switch / host bridge / NUMA node (PIX, PXB, PHB, NODE)
UNI_PCIE_FAR = Band(0.70, 0.45)  # across sockets (SYS), or topology unknown
UNI_NVLINK = Band(0.70, 0.50)

# Bidirectional over unidirectional (2.0 would be a perfect full-duplex link).
BIDI_OVER_UNI = Band(1.6, 1.2)

# Pinned host<->GPU copies as a share of the PCIe line rate.
HOST_LINK = Band(0.80, 0.60)

# 16-byte peer copy latency in microseconds (lower is better). The PCIe lines come from PCIe
# boxes (0.4-2.3 us); NVLink pairs measure 2.2-2.3 us on A100 bridges and H200 NVSwitch and more
# through NVSwitch fabrics under a hypervisor, so they get lines of their own: the staged trip
# (10-25 us) is what tells a peer path that is not engaged.
P2P_LATENCY_PASS_US = 3.0
P2P_LATENCY_WARN_US = 8.0
NVLINK_LATENCY_PASS_US = 5.0
NVLINK_LATENCY_WARN_US = 10.0


@dataclass(frozen=True)
class LatencyLine:
    pass_us: float
    warn_us: float


PCIE_LATENCY = LatencyLine(P2P_LATENCY_PASS_US, P2P_LATENCY_WARN_US)
NVLINK_LATENCY = LatencyLine(NVLINK_LATENCY_PASS_US, NVLINK_LATENCY_WARN_US)


def latency_line(kind: str) -> LatencyLine:
    return NVLINK_LATENCY if kind == "nvlink" else PCIE_LATENCY


#: A peer copy at least this much faster than the staged one shows the peer path is used.
LATENCY_GAIN_MIN = 2.0

# Staged (host-memory) path, judged when P2P is not expected.
STAGED_SHARE_OF_LINK = 0.25
STAGED_LATENCY_MAX_US = 25.0

#: BAR1 below this cannot map peer memory well (ReBAR / Above-4G off).
BAR1_MIN_BYTES = 1 << 30

#: A figure this much below the baseline is a regression (a share of the baseline).
REGRESSION_SHARE = 0.90
