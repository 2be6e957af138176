"""How busy a simulated GPU is: the heartbeat files a serving process writes (the lab's SGLang
stand-in, ``LOAD_DIR/<uuid>.json``), turned into power draw, utilisation and memory use.

A container's files are found through its rootfs on the node's disk, so ``nvidia-smi`` on the
node sees the load of a server in a container; a file older than :data:`STALE_S` reads as idle.
"""

from __future__ import annotations

import glob
import json
import os
import time
from dataclasses import dataclass

from .gpus import Gpu

LOAD_DIR = "/var/lib/gpuhost-lab/gpu-load"
CT_UPPERS = "/var/lib/gpuhost-lab/disk/ct/*/upper"
STALE_S = 5.0
SATURATION = 16  # requests in flight at which a GPU is fully busy


@dataclass(frozen=True)
class Load:
    inflight: int = 0
    memory_fraction: float = 0.0


def _read(path: str) -> Load | None:
    try:
        with open(path) as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    if time.time() - float(data.get("updated", 0)) > STALE_S:
        return None
    return Load(int(data.get("inflight", 0)), float(data.get("memory_fraction", 0.0)))


def current(gpu: Gpu) -> Load:
    paths = [os.path.join(LOAD_DIR, f"{gpu.uuid}.json")]
    paths += glob.glob(os.path.join(CT_UPPERS, LOAD_DIR.lstrip("/"), f"{gpu.uuid}.json"))
    found = [load for load in (_read(p) for p in paths) if load is not None]
    if not found:
        return Load()
    return Load(sum(x.inflight for x in found), min(1.0, sum(x.memory_fraction for x in found)))


def idle_power(gpu: Gpu) -> float:
    """80-90 W for a 600 W card at idle, a little different per GPU."""
    return round(gpu.power_limit_w * 0.1433 + (gpu.index * 1.37) % 4.6 - 2.0, 2)


def utilization(load: Load) -> int:
    return min(100, round(100 * load.inflight / SATURATION))


def power(gpu: Gpu, load: Load) -> float:
    idle = idle_power(gpu)
    busy = gpu.power_limit_w * 0.95
    return round(idle + (busy - idle) * utilization(load) / 100, 2)
