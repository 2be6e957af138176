#!/usr/bin/env python3
"""GPU sampler: one JSON line per tick with every GPU's power, clocks, utilisation and memory.

Standalone on purpose: this one file is copied to the target and run there with the target's
``python3`` (stdlib only; NVML through ``pynvml`` from nvidia-ml-py when it imports, else
``nvidia-smi --query-gpu=... --format=csv,noheader,nounits -lms N``).

Output (JSON Lines, flushed per line):

- ``{"type": "start", "schema": "gpuhost.gpu-samples/1", "backend": ..., "interval_ms": ..., "gpus": [...], ...}``
- ``{"type": "sample", "t_mono": ..., "t_wall": ..., "gpus": [{"index": 0, "power_w": ..., ...}, ...]}``
- ``{"type": "end", "reason": "signal|duration|source-ended|error", "samples": N, ...}``

``t_mono`` is ``time.monotonic()`` and ``t_wall`` is ``time.time()`` on the target, both in seconds.
It runs until SIGTERM/SIGINT or ``--duration`` seconds. Missing figures are ``null``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from typing import IO, Any

SCHEMA = "gpuhost.gpu-samples/1"

# nvidia-smi query fields, in order, and the sample key each fills.
SMI_FIELDS: tuple[tuple[str, str], ...] = (
    ("index", "index"),
    ("power.draw", "power_w"),
    ("power.limit", "power_limit_w"),
    ("utilization.gpu", "util_gpu_pct"),
    ("utilization.memory", "util_mem_pct"),
    ("clocks.sm", "sm_clock_mhz"),
    ("clocks.mem", "mem_clock_mhz"),
    ("memory.used", "mem_used_mib"),
    ("memory.total", "mem_total_mib"),
    ("temperature.gpu", "temp_c"),
)
SMI_INFO_FIELDS = "index,name,uuid,power.limit"


class _Stop:
    """Set by SIGTERM/SIGINT; a running nvidia-smi child is ended so that its pipe closes."""

    def __init__(self) -> None:
        self.requested = False
        self.child: subprocess.Popen[str] | None = None

    def __call__(self, signum: int, _frame: Any) -> None:
        self.requested = True
        if self.child is not None and self.child.poll() is None:
            self.child.terminate()


def _num(text: str) -> float | int | None:
    """A CSV cell as a number; ``[N/A]``, ``[Not Supported]`` and the like are ``None``."""
    text = text.strip()
    if not text or text.startswith("[") or text.upper() in {"N/A", "NA"}:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return int(value) if value.is_integer() and "." not in text else value


def parse_smi_line(line: str) -> dict[str, Any] | None:
    """One ``nvidia-smi --query-gpu`` CSV line (:data:`SMI_FIELDS` order) as a GPU sample, or ``None``."""
    cells = [c.strip() for c in line.split(",")]
    if len(cells) != len(SMI_FIELDS) or _num(cells[0]) is None:
        return None
    return {key: _num(cell) for (_field, key), cell in zip(SMI_FIELDS, cells, strict=False)}


def _emit(out: IO[str], obj: dict[str, Any]) -> None:
    out.write(json.dumps(obj, separators=(",", ":")) + "\n")
    out.flush()


def _stamp() -> dict[str, float]:
    return {"t_mono": round(time.monotonic(), 4), "t_wall": round(time.time(), 4)}


# ---------------------------------------------------------------------------------------------- NVML


def _nvml() -> Any | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:  # noqa: BLE001 - any failure means: use nvidia-smi
        return None


def _try(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - a figure NVML does not give is null
        return None


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def _watts(milliwatts: Any) -> float | None:
    return None if milliwatts is None else round(milliwatts / 1000.0, 2)


def _nvlink_kib(nv: Any, handle: Any) -> tuple[int | None, int | None]:
    """Cumulative NVLink data TX/RX in KiB over all links (NVML field values), or ``None``."""
    tx_id = getattr(nv, "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX", None)
    rx_id = getattr(nv, "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX", None)
    if tx_id is None or rx_id is None:
        return None, None
    values = _try(nv.nvmlDeviceGetFieldValues, handle, [tx_id, rx_id])
    if not values:
        return None, None
    out: list[int | None] = []
    for v in values:
        if getattr(v, "nvmlReturn", 1) != 0:
            out.append(None)
        else:
            out.append(int(v.value.ullVal))
    return out[0], out[1]


def _nvml_gpu(
    nv: Any, index: int, handle: Any, prev: dict[int, tuple[float, int | None, int | None]]
) -> dict[str, Any]:
    util = _try(nv.nvmlDeviceGetUtilizationRates, handle)
    mem = _try(nv.nvmlDeviceGetMemoryInfo, handle)
    power = _try(nv.nvmlDeviceGetPowerUsage, handle)
    limit = _try(nv.nvmlDeviceGetEnforcedPowerLimit, handle)
    tx = _try(nv.nvmlDeviceGetPcieThroughput, handle, nv.NVML_PCIE_UTIL_TX_BYTES)
    rx = _try(nv.nvmlDeviceGetPcieThroughput, handle, nv.NVML_PCIE_UTIL_RX_BYTES)
    sample: dict[str, Any] = {
        "index": index,
        "power_w": _watts(power),
        "power_limit_w": _watts(limit),
        "util_gpu_pct": None if util is None else util.gpu,
        "util_mem_pct": None if util is None else util.memory,
        "sm_clock_mhz": _try(nv.nvmlDeviceGetClockInfo, handle, nv.NVML_CLOCK_SM),
        "mem_clock_mhz": _try(nv.nvmlDeviceGetClockInfo, handle, nv.NVML_CLOCK_MEM),
        "mem_used_mib": None if mem is None else mem.used // (1024 * 1024),
        "mem_total_mib": None if mem is None else mem.total // (1024 * 1024),
        "temp_c": _try(nv.nvmlDeviceGetTemperature, handle, nv.NVML_TEMPERATURE_GPU),
        "pcie_tx_kib_s": tx,
        "pcie_rx_kib_s": rx,
    }
    now = time.monotonic()
    nvl_tx, nvl_rx = _nvlink_kib(nv, handle)
    last = prev.get(index)
    if last is not None and nvl_tx is not None and last[1] is not None and now > last[0]:
        sample["nvlink_tx_kib_s"] = round((nvl_tx - last[1]) / (now - last[0]), 1)
    if last is not None and nvl_rx is not None and last[2] is not None and now > last[0]:
        sample["nvlink_rx_kib_s"] = round((nvl_rx - last[2]) / (now - last[0]), 1)
    prev[index] = (now, nvl_tx, nvl_rx)
    return sample


def run_nvml(nv: Any, out: IO[str], interval_s: float, deadline: float | None, stop: _Stop) -> tuple[int, str]:
    count = nv.nvmlDeviceGetCount()
    handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    gpus = [
        {
            "index": i,
            "name": _text(_try(nv.nvmlDeviceGetName, h)),
            "uuid": _text(_try(nv.nvmlDeviceGetUUID, h)),
            "power_limit_w": _watts(_try(nv.nvmlDeviceGetEnforcedPowerLimit, h)),
        }
        for i, h in enumerate(handles)
    ]
    _emit(out, _start_line("nvml", interval_s, gpus))
    prev: dict[int, tuple[float, int | None, int | None]] = {}
    n = 0
    next_tick = time.monotonic()
    while True:
        if stop.requested:
            return n, "signal"
        if deadline is not None and time.monotonic() >= deadline:
            return n, "duration"
        stamp = _stamp()
        _emit(out, {"type": "sample", **stamp, "gpus": [_nvml_gpu(nv, i, h, prev) for i, h in enumerate(handles)]})
        n += 1
        next_tick += interval_s
        delay = next_tick - time.monotonic()
        if delay < 0:  # fell behind: skip the missed ticks instead of bursting
            next_tick = time.monotonic()
            delay = 0.0
        time.sleep(delay)


# ---------------------------------------------------------------------------------------- nvidia-smi


def smi_command(interval_ms: int, smi: str = "nvidia-smi") -> list[str]:
    fields = ",".join(f for f, _ in SMI_FIELDS)
    return [smi, f"--query-gpu={fields}", "--format=csv,noheader,nounits", "-lms", str(interval_ms)]


def _smi_info(smi: str) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [smi, f"--query-gpu={SMI_INFO_FIELDS}", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    gpus = []
    for line in proc.stdout.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == 4 and _num(cells[0]) is not None:
            gpus.append({"index": int(cells[0]), "name": cells[1], "uuid": cells[2], "power_limit_w": _num(cells[3])})
    return gpus


def run_smi(out: IO[str], interval_ms: int, deadline: float | None, stop: _Stop, smi: str) -> tuple[int, str]:
    gpus = _smi_info(smi)
    _emit(out, _start_line("nvidia-smi", interval_ms / 1000.0, gpus))
    if not gpus:
        return 0, "error"
    n_gpus = len(gpus)
    proc = subprocess.Popen(smi_command(interval_ms, smi), stdout=subprocess.PIPE, text=True, bufsize=1)
    stop.child = proc
    n = 0
    group: list[dict[str, Any]] = []
    stamp: dict[str, float] = {}
    reason = "source-ended"
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if stop.requested:
                reason = "signal"
                break
            if deadline is not None and time.monotonic() >= deadline:
                reason = "duration"
                break
            gpu = parse_smi_line(line)
            if gpu is None:
                continue
            if group and any(g["index"] == gpu["index"] for g in group):
                group = []  # a tick began before the last one was complete: drop the partial one
            if not group:
                stamp = _stamp()
            group.append(gpu)
            if len(group) == n_gpus:
                _emit(out, {"type": "sample", **stamp, "gpus": sorted(group, key=lambda g: g["index"])})
                n += 1
                group = []
        else:
            if stop.requested:
                reason = "signal"
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
    return n, reason


# ----------------------------------------------------------------------------------------------- main


def _start_line(backend: str, interval_s: float, gpus: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "start",
        "schema": SCHEMA,
        "backend": backend,
        "interval_ms": round(interval_s * 1000),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        **_stamp(),
        "gpus": gpus,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Sample every GPU as JSON Lines until stopped.")
    ap.add_argument("--interval-ms", type=int, default=500, help="sampling period (default 500 ms = 2 Hz)")
    ap.add_argument("--duration", type=float, default=0.0, help="stop after this many seconds (0: until signalled)")
    ap.add_argument("--output", "-o", default="-", help="file to write (default stdout)")
    ap.add_argument("--backend", choices=("auto", "nvml", "nvidia-smi"), default="auto")
    ap.add_argument("--nvidia-smi", default="nvidia-smi", help="nvidia-smi executable")
    args = ap.parse_args(argv)
    if args.interval_ms < 50:
        ap.error("--interval-ms must be at least 50")

    stop = _Stop()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    deadline = time.monotonic() + args.duration if args.duration > 0 else None
    out: IO[str] = sys.stdout if args.output == "-" else open(args.output, "a", encoding="utf-8")  # noqa: SIM115
    try:
        nv = _nvml() if args.backend in ("auto", "nvml") else None
        if nv is not None:
            n, reason = run_nvml(nv, out, args.interval_ms / 1000.0, deadline, stop)
        elif args.backend == "nvml":
            _emit(
                out,
                {
                    "type": "end",
                    "reason": "error",
                    "error": "pynvml not importable or nvmlInit failed",
                    "samples": 0,
                    **_stamp(),
                },
            )
            return 2
        elif shutil.which(args.nvidia_smi) is None:
            _emit(
                out, {"type": "end", "reason": "error", "error": "no NVML and no nvidia-smi", "samples": 0, **_stamp()}
            )
            return 2
        else:
            n, reason = run_smi(out, args.interval_ms, deadline, stop, args.nvidia_smi)
        _emit(out, {"type": "end", "reason": reason, "samples": n, **_stamp()})
        return 0 if reason != "error" else 2
    finally:
        if out is not sys.stdout:
            out.close()


if __name__ == "__main__":
    sys.exit(main())
