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
FAULTS = ("nan-on-first-decode", "hang-cuda-graph", "hang-autotune", "garbage", "oom-on-load")
#: per-variant faults for ``gpuhost tune`` tests, one a line: ``FAULT FLAG [VALUE]``; FAULT is ``fast-wrong`` (the
#: server started with that flag decodes twice as fast and answers garbage) or ``crash`` (it dies at start-up)
VARIANT_FAULTS_FILE = f"{CONTROL_DIR}/variant_faults"
VARIANT_FAULTS = ("fast-wrong", "crash")


def faults() -> set[str]:
    try:
        with open(FAULTS_FILE) as fh:
            return {line.strip() for line in fh if line.strip() and not line.startswith("#")}
    except OSError:
        return set()


def variant_faults(argv: list[str]) -> set[str]:
    """The per-variant faults whose flag (and value, if the line gives one) is in this server's ``argv``."""
    try:
        with open(VARIANT_FAULTS_FILE) as fh:
            lines = [line.split() for line in fh if line.strip() and not line.startswith("#")]
    except OSError:
        return set()
    out: set[str] = set()
    for words in lines:
        if len(words) < 2 or words[0] not in VARIANT_FAULTS or words[1] not in argv:
            continue
        at = argv.index(words[1])
        if len(words) == 2 or (at + 1 < len(argv) and argv[at + 1] == words[2]):
            out.add(words[0])
    return out


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


def set_ulimit(target_soft_limit: int = 65535) -> None:
    """Raise the soft open-files limit as SGLang does at start (sglang 0.5.23 ``srt/utils/common.py:2585-2594``
    ``set_ulimit``, called by the server, ``entrypoints/engine.py:1945``, and the benchmark client,
    ``benchmark/serving.py:2054``): a level of 1,024 connections needs more than systemd's default 1,024.
    (SGLang also raises RLIMIT_STACK; the stand-in leaves it, its threads would each reserve that much.)"""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < target_soft_limit:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(target_soft_limit, hard), hard))
        except ValueError:
            pass
