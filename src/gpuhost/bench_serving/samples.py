"""The sampler's JSON Lines, read back, and per-GPU statistics over a time window."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from statistics import fmean
from typing import Any

from gpuhost.bench_serving.parse import loads

SAMPLE_KEYS = (
    "power_w",
    "power_limit_w",
    "util_gpu_pct",
    "util_mem_pct",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "mem_used_mib",
    "mem_total_mib",
    "temp_c",
    "pcie_tx_kib_s",
    "pcie_rx_kib_s",
    "nvlink_tx_kib_s",
    "nvlink_rx_kib_s",
)


@dataclass(frozen=True)
class Tick:
    """One sample line: wall and monotonic time on the target, and one dict per GPU."""

    t_wall: float
    t_mono: float
    gpus: tuple[dict[str, Any], ...]


@dataclass
class SampleSeries:
    backend: str | None = None
    interval_ms: int | None = None
    host: str | None = None
    gpus: list[dict[str, Any]] = field(default_factory=list)
    ticks: list[Tick] = field(default_factory=list)
    end_reason: str | None = None
    bad_lines: int = 0
    #: what a reader of a saved capture left out, and where (file:line)
    notes: list[str] = field(default_factory=list)


def read_samples(text: str) -> SampleSeries:
    """Parse the sampler's output; lines that are not JSON (a cut-off last line) are counted, not fatal."""
    series = SampleSeries()
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            obj = loads(line)
        except ValueError:  # JSONDecodeError, or a number no float holds
            series.bad_lines += 1
            continue
        kind = obj.get("type")
        if kind == "start":
            series.backend = obj.get("backend")
            series.interval_ms = obj.get("interval_ms")
            series.host = obj.get("host")
            series.gpus = list(obj.get("gpus") or [])
        elif kind == "sample":
            wall, mono = float(obj["t_wall"]), float(obj["t_mono"])
            if not (math.isfinite(wall) and math.isfinite(mono)):  # a number past float's range: no time
                series.bad_lines += 1
                continue
            series.ticks.append(Tick(wall, mono, tuple(obj.get("gpus") or ())))
        elif kind == "end":
            series.end_reason = obj.get("reason")
    return series


@dataclass(frozen=True)
class GpuStats:
    """One GPU over one window. ``None`` where the sampler got no figure."""

    index: int
    samples: int
    power_mean_w: float | None
    power_max_w: float | None
    power_limit_w: float | None
    power_pct_of_limit: float | None
    util_gpu_mean_pct: float | None
    util_mem_mean_pct: float | None
    sm_clock_mean_mhz: float | None
    mem_clock_mean_mhz: float | None
    mem_used_max_mib: float | None
    pcie_tx_mean_kib_s: float | None
    pcie_rx_mean_kib_s: float | None
    nvlink_tx_mean_kib_s: float | None
    nvlink_rx_mean_kib_s: float | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _mean(values: list[float]) -> float | None:
    return round(fmean(values), 2) if values else None


def _col(rows: list[dict[str, Any]], key: str) -> list[float]:
    return [float(r[key]) for r in rows if isinstance(r.get(key), (int, float))]


def window(series: SampleSeries, start_wall: float, end_wall: float, offset_s: float = 0.0) -> list[Tick]:
    """The ticks inside ``[start, end]`` (benchmark clock); ``offset_s`` is target clock minus benchmark clock."""
    lo, hi = start_wall + offset_s, end_wall + offset_s
    return [t for t in series.ticks if lo <= t.t_wall <= hi]


def gpu_stats(ticks: list[Tick]) -> list[GpuStats]:
    """Per-GPU statistics over ``ticks`` (pure)."""
    per_gpu: dict[int, list[dict[str, Any]]] = {}
    for tick in ticks:
        for g in tick.gpus:
            per_gpu.setdefault(int(g["index"]), []).append(g)
    out = []
    for index in sorted(per_gpu):
        rows = per_gpu[index]
        power = _col(rows, "power_w")
        limits = _col(rows, "power_limit_w")
        limit = max(limits) if limits else None
        pmean = _mean(power)
        mem = _col(rows, "mem_used_mib")
        out.append(
            GpuStats(
                index=index,
                samples=len(rows),
                power_mean_w=pmean,
                power_max_w=max(power) if power else None,
                power_limit_w=limit,
                power_pct_of_limit=round(100.0 * pmean / limit, 1) if pmean is not None and limit else None,
                util_gpu_mean_pct=_mean(_col(rows, "util_gpu_pct")),
                util_mem_mean_pct=_mean(_col(rows, "util_mem_pct")),
                sm_clock_mean_mhz=_mean(_col(rows, "sm_clock_mhz")),
                mem_clock_mean_mhz=_mean(_col(rows, "mem_clock_mhz")),
                mem_used_max_mib=max(mem) if mem else None,
                pcie_tx_mean_kib_s=_mean(_col(rows, "pcie_tx_kib_s")),
                pcie_rx_mean_kib_s=_mean(_col(rows, "pcie_rx_kib_s")),
                nvlink_tx_mean_kib_s=_mean(_col(rows, "nvlink_tx_kib_s")),
                nvlink_rx_mean_kib_s=_mean(_col(rows, "nvlink_rx_kib_s")),
            )
        )
    return out
