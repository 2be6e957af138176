"""Lab switches: delays and faults, read from the machine the server runs on."""

from __future__ import annotations

import os
import time

CONTROL_DIR = "/etc/gpuhost-lab/sglang"
FAULTS_FILE = f"{CONTROL_DIR}/faults"  # one fault name a line
DELAY_FILE = f"{CONTROL_DIR}/delay_scale"  # a float; 1.0 = the default few seconds
DELAY_ENV = "GPUHOST_LAB_SGLANG_DELAY_SCALE"
ITL_FILE = f"{CONTROL_DIR}/itl_ms"  # decode time per token (not scaled); default 4 ms
ITL_ENV = "GPUHOST_LAB_SGLANG_ITL_MS"
FAULTS = ("nan-on-first-decode", "hang-cuda-graph", "garbage", "oom-on-load")


def faults() -> set[str]:
    try:
        with open(FAULTS_FILE) as fh:
            return {line.strip() for line in fh if line.strip() and not line.startswith("#")}
    except OSError:
        return set()


def delay_scale() -> float:
    raw = os.environ.get(DELAY_ENV)
    if raw is None:
        try:
            with open(DELAY_FILE) as fh:
                raw = fh.read().strip()
        except OSError:
            raw = "1"
    try:
        return max(0.0, float(raw))
    except ValueError:
        return 1.0


def itl() -> float:
    """Seconds per generated token."""
    raw = os.environ.get(ITL_ENV)
    if raw is None:
        try:
            with open(ITL_FILE) as fh:
                raw = fh.read().strip()
        except OSError:
            raw = "4"
    try:
        return max(0.0, float(raw)) / 1000
    except ValueError:
        return 0.004


def pause(seconds: float) -> None:
    """Sleep ``seconds`` scaled by the lab's delay scale."""
    scaled = seconds * delay_scale()
    if scaled > 0:
        time.sleep(scaled)
