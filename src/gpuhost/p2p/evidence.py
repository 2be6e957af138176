"""What the judge looks at, whatever produced it.

The probe's report, a ``p2pBandwidthLatencyTest`` log, ``nvbandwidth`` output and
``nvidia-smi topo -p2p`` all become one :class:`Evidence`; each fills what it knows
and leaves the rest ``None``. The judge checks only what is present.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class PathFigures:
    """Copies from one GPU to another over one path (peer access on, or staged through host)."""

    uni_gbps: float | None = None
    bidi_gbps: float | None = None  # both directions together
    latency_us: float | None = None  # one 16-byte copy
    integrity_checked: int = 0
    integrity_failures: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return self.uni_gbps is None and self.bidi_gbps is None and self.latency_us is None


@dataclass
class GpuEvidence:
    index: int
    name: str | None = None
    bus_id: str | None = None
    compute_capability: str | None = None
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    pcie_gen_load: int | None = None  # sampled while a copy loaded the link
    pcie_width_load: int | None = None
    pcie_width_idle: int | None = None
    bar1_bytes: int | None = None
    memory_bytes: int | None = None
    virtualization: str | None = None  # NVML: none, passthrough, vgpu...
    nvlink_links: int | None = None  # None: not read (a capture that shows no NVLink state)
    nvlink_to_switch: bool = False
    nvlink_peers: dict[str, int] = field(default_factory=dict)  # remote bus id -> links
    h2d_gbps: float | None = None
    d2h_gbps: float | None = None
    d2d_gbps: float | None = None
    d2d_latency_us: float | None = None
    integrity_failures: list[str] = field(default_factory=list)
    cpu_affinity: str | None = None  # nvidia-smi topo -m: CPUs near the GPU, e.g. 0-55,112-167
    numa_node: str | None = None  # NUMA affinity
    host: str | None = None  # set when a capture spans machines (nccl-tests over several nodes)
    device: int | None = None  # the CUDA device number on that host

    @property
    def label(self) -> str:
        if self.host is not None and self.device is not None:
            return f"{self.host} GPU{self.device}"
        return f"GPU{self.index}"


@dataclass
class PairEvidence:
    src: int
    dst: int
    nvml_status: dict[str, str | None] = field(default_factory=dict)  # read/write/nvlink/atomics/pci
    topology: str | None = None  # PIX/PXB/PHB/NODE/SYS, NV#, or None (nvidia-smi topo -m, NVML)
    can_access_peer: bool | None = None
    p2p: PathFigures | None = None
    staged: PathFigures | None = None
    p2p_skipped: str | None = None

    @property
    def label(self) -> str:
        return f"GPU{self.src}->GPU{self.dst}"


@dataclass
class Evidence:
    source: str  # "probe", "p2pBandwidthLatencyTest", "nvbandwidth", "nvidia-smi topo -p2p|-m", "nccl-tests"
    gpus: list[GpuEvidence] = field(default_factory=list)
    pairs: list[PairEvidence] = field(default_factory=list)
    in_vm: bool | None = None
    container: str | None = None
    kernel_cmdline: str | None = None
    notes: list[str] = field(default_factory=list)  # what the source could not say
    nccl: dict[str, object] | None = None
    partial: list[str] = field(default_factory=list)  # why the capture is incomplete (cut short, rows missing)
    waived: dict[str, str] = field(default_factory=dict)  # test -> why the tool skipped it
    integrity_failures: list[str] = field(default_factory=list)  # data errors the tool could not pin to a pair
    p2p_copy: str = "P2P Writes"  # how the peer figures were copied (cuda-samples writes; nvbandwidth says)
    nics: list[str] = field(default_factory=list)  # NIC columns of nvidia-smi topo -m
    nic_links: dict[tuple[int, str], str] = field(default_factory=dict)  # (GPU, NIC) -> link type

    @property
    def measured(self) -> bool:
        """Whether any copy was timed (peer, staged, host or NCCL), or the tool reported a result."""
        pairs = any(
            (p.p2p is not None and not p.p2p.empty) or (p.staged is not None and not p.staged.empty) for p in self.pairs
        )
        gpus = any(g.h2d_gbps is not None or g.d2h_gbps is not None or g.d2d_gbps is not None for g in self.gpus)
        return pairs or gpus or bool(self.nccl) or bool(self.waived) or bool(self.integrity_failures)

    def gpu(self, index: int) -> GpuEvidence | None:
        return next((g for g in self.gpus if g.index == index), None)

    def pair(self, src: int, dst: int) -> PairEvidence | None:
        return next((p for p in self.pairs if p.src == src and p.dst == dst), None)

    @property
    def gpu_count(self) -> int:
        indexes = {g.index for g in self.gpus} | {p.src for p in self.pairs} | {p.dst for p in self.pairs}
        return len(indexes)
