"""``nvidia-smi topo -m`` and ``topo -p2p r|w|n|a|p`` in NVIDIA's layout (tab separated; the
header underlined with ANSI codes only on a terminal)."""

from __future__ import annotations

from .gpus import Gpu

UNDERLINE, RESET = "\x1b[4m", "\x1b[0m"

MATRIX_LEGEND = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""

P2P_LEGEND = """
Legend:

  X    = Self
  OK   = Status Ok
  CNS  = Chipset not supported
  GNS  = GPU not supported
  TNS  = Topology not supported
  NS   = Not supported
  U    = Unknown
"""

P2P_CAPS = {"r": "read", "w": "write", "n": "nvlink", "a": "atomics", "p": "prop"}


def _header(cells: list[str], tty: bool, lead: str = "", trail: str = "") -> str:
    text = "\t".join(cells) + trail
    return f"{lead}\t{UNDERLINE}{text}{RESET}" if tty else f"{lead}\t{text}"


def matrix(gpus: list[Gpu], tty: bool = False) -> str:
    names = [f"GPU{i}" for i in range(len(gpus))]
    lines = [_header(names + ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"], tty)]
    for i, gpu in enumerate(gpus):
        cells = [" X " if i == j else gpu.link(other) for j, other in enumerate(gpus)]
        lines.append("\t".join([names[i]] + cells + [gpu.cpulist, str(gpu.numa), "", "N/A"]))
    return "\n".join(lines) + "\n" + MATRIX_LEGEND


def p2p_status(a: Gpu, b: Gpu, cap: str) -> str:
    """What the driver reports for a pair on one host (bare metal or LXC: the host's driver decides).

    PCIe cards have no NVLink; atomics over PCIe are not supported between these boards."""
    if cap in ("n", "a"):
        return "NS"
    if "vm_pcie" in a.extra:  # a VM's guest (see gpuhost.lab.guest_boot for the model)
        return _vm_p2p_status(a, b)
    return "OK"


def _vm_p2p_status(a: Gpu, b: Gpu) -> str:
    """Inside a VM the emulated host bridge is in no chipset allow-list: CNS, unless the hypervisor
    (visible: no kvm=off) grants both GPUs, on PCIe ports, the same GPUDirect clique."""
    granted = all(g.extra.get("vm_pcie") and g.extra.get("vm_hypervisor_visible") for g in (a, b))
    clique = a.extra.get("vm_clique")
    if granted and clique is not None and clique == b.extra.get("vm_clique"):
        return "OK"
    return "CNS"


def p2p(gpus: list[Gpu], cap: str, tty: bool = False) -> str:
    names = [f"GPU{i}" for i in range(len(gpus))]
    lines = [_header(names, tty, lead=" ", trail="\t")]
    for i, gpu in enumerate(gpus):
        cells = ["X" if i == j else p2p_status(gpu, other, cap) for j, other in enumerate(gpus)]
        lines.append(" " + "\t".join([names[i]] + cells) + "\t")
    return "\n".join(lines) + "\n" + P2P_LEGEND
