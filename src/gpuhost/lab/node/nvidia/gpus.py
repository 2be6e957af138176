"""The GPUs of a node as the driver knows them, and which of them a process can see."""

from __future__ import annotations

import glob
import json
import os
import stat
from dataclasses import dataclass, field

from . import paths


@dataclass(frozen=True)
class Gpu:
    """One GPU's hardware, as the lab planned it (see gpuhost.lab.gpu.topology)."""

    index: int  # the kernel's device minor (/dev/nvidiaN)
    bdf: str  # 0000:41:00.0
    name: str
    device_id: str  # "2bb5"
    subsys_id: str  # "204e"
    uuid: str
    serial: str
    vbios: str
    memory_mib: int
    bar1_mib: int
    arch: str
    compute_cap: str
    numa: int
    cpulist: str
    root_complex: int
    switch: int | None
    gen_max: int
    width_max: int
    idle_gen: int
    irq: int
    needs_open_module: bool
    power_limit_w: int
    extra: dict[str, object] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Gpu:
        known = {f for f in cls.__dataclass_fields__ if f != "extra"}
        return cls(
            **{k: v for k, v in data.items() if k in known},  # type: ignore[arg-type]
            extra={k: v for k, v in data.items() if k not in known},
        )

    @property
    def nvml_bus_id(self) -> str:
        """``00000000:41:00.0``: NVML prints an 8-digit domain."""
        domain, rest = self.bdf.split(":", 1)
        return f"{int(domain, 16):08X}:{rest.upper()}"

    def link(self, other: Gpu) -> str:
        """The ``nvidia-smi topo -m`` connection type between two GPUs of one host."""
        if self.numa != other.numa:
            return "SYS"
        if self.switch is not None and self.switch == other.switch:
            return "PIX"
        if self.root_complex == other.root_complex:
            return "PHB"
        return "NODE"


def node_gpus(state_file: str = paths.NODE_STATE) -> list[Gpu]:
    """The node's GPUs from its description (on the node only)."""
    try:
        with open(state_file) as fh:
            extra = json.load(fh).get("extra", {})
    except OSError:
        return []
    return [Gpu.from_dict(g) for g in extra.get("gpu", {}).get("gpus", [])]


def driver_gpus() -> list[Gpu]:
    """The GPUs the loaded driver bound (``/proc/driver/nvidia/gpus/*``), by device minor."""
    out = []
    for path in glob.glob(f"{paths.PROC_NVIDIA}/gpus/*/{paths.LAB_GPU_FILE}"):
        try:
            with open(path) as fh:
                out.append(Gpu.from_dict(json.load(fh)))
        except (OSError, ValueError):
            continue
    return sorted(out, key=lambda g: g.index)


def char_device(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISCHR(st.st_mode):
        return None
    return os.major(st.st_rdev), os.minor(st.st_rdev)


def visible_minors() -> set[int]:
    """Minors of the ``/dev/nvidiaN`` nodes this process's /dev has (a container sees those passed)."""
    minors = set()
    for path in glob.glob("/dev/nvidia[0-9]*"):
        dev = char_device(path)
        if dev and dev[0] == paths.NVIDIA_MAJOR and dev[1] < paths.MODESET_MINOR:
            minors.add(dev[1])
    return minors


def has_control_device() -> bool:
    return char_device("/dev/nvidiactl") == (paths.NVIDIA_MAJOR, paths.CTL_MINOR)


def loaded_module_version() -> str | None:
    """The version of the nvidia kernel module that is loaded now (``/proc/driver/nvidia/version``)."""
    try:
        with open(f"{paths.PROC_NVIDIA}/version") as fh:
            first = fh.readline()
    except OSError:
        return None
    words = first.split()
    for word in words:
        parts = word.split(".")
        if len(parts) >= 2 and all(p.isdigit() for p in parts):
            return word
    return None


def persistence_enabled() -> bool:
    return os.path.exists(paths.PERSISTENCE_FLAG)
