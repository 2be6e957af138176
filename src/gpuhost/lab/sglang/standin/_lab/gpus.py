"""The GPUs this process can use, as the driver reports them (``nvidia-smi``, like NVML would)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Device:
    index: int
    uuid: str
    name: str
    major: int
    minor: int
    memory_mib: int


@lru_cache(maxsize=1)
def devices() -> tuple[Device, ...]:
    """Every visible GPU (honouring ``CUDA_VISIBLE_DEVICES``); empty without a working driver."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,uuid,name,compute_cap,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ()
    if out.returncode != 0:
        return ()
    found = []
    for line in out.stdout.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 5:
            continue
        major, _, minor = cells[3].partition(".")
        found.append(Device(int(cells[0]), cells[1], cells[2], int(major), int(minor or 0), int(cells[4])))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        wanted = [v.strip() for v in visible.split(",") if v.strip()]
        found = [d for d in found if str(d.index) in wanted or d.uuid in wanted]
    return tuple(found)
