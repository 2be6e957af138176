"""A sweep's results: each level's benchmark figures next to what the GPUs did during that level.

Pure functions build the document (schema ``gpuhost.bench-sglang/1``, ``docs/schema/bench-sglang.schema.json``)
and the text table; :func:`write_run_dir` is the one place that touches the disk.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpuhost.bench_serving.parse import BenchResult
from gpuhost.bench_serving.samples import GpuStats, SampleSeries, gpu_stats, window
from gpuhost.checks.finding import Finding, worst

SCHEMA = "gpuhost.bench-sglang/1"


@dataclass
class LevelRun:
    """One concurrency level: the benchmark's result and its start/end on the benchmark host's wall clock."""

    concurrency: int | None
    result: BenchResult
    start_wall: float | None = None
    end_wall: float | None = None
    label: str | None = None


@dataclass
class LevelSummary:
    concurrency: int | None
    label: str
    result: BenchResult
    gpus: list[GpuStats] = field(default_factory=list)
    start_wall: float | None = None
    end_wall: float | None = None

    def figure(self, name: str) -> Any:
        return self.result.figures.get(name)

    @property
    def power_mean_w(self) -> float | None:
        vals = [g.power_mean_w for g in self.gpus if g.power_mean_w is not None]
        return round(sum(vals) / len(vals), 1) if vals else None

    @property
    def power_pct_of_limit(self) -> float | None:
        vals = [g.power_pct_of_limit for g in self.gpus if g.power_pct_of_limit is not None]
        return round(sum(vals) / len(vals), 1) if vals else None

    @property
    def util_mean_pct(self) -> float | None:
        vals = [g.util_gpu_mean_pct for g in self.gpus if g.util_gpu_mean_pct is not None]
        return round(sum(vals) / len(vals), 1) if vals else None


def summarise(levels: list[LevelRun], samples: SampleSeries | None, offset_s: float = 0.0) -> list[LevelSummary]:
    """Align the samples to each level's window and compute the per-GPU statistics (pure)."""
    out = []
    for n, lv in enumerate(levels):
        gpus: list[GpuStats] = []
        if samples is not None and lv.start_wall is not None and lv.end_wall is not None:
            gpus = gpu_stats(window(samples, lv.start_wall, lv.end_wall, offset_s))
        label = lv.label or (f"c{lv.concurrency}" if lv.concurrency is not None else f"level{n + 1}")
        out.append(
            LevelSummary(
                concurrency=lv.concurrency,
                label=label,
                result=lv.result,
                gpus=gpus,
                start_wall=lv.start_wall,
                end_wall=lv.end_wall,
            )
        )
    return out


def with_saved_samples(summaries: list[LevelSummary], samples: SampleSeries) -> list[LevelSummary]:
    """The one level of a saved result, its GPU statistics taken over the whole of a saved sample capture (a dmon
    capture has no clock to align with the level, so the capture is read as taken during it). Pure."""
    if len(summaries) != 1:
        raise ValueError(f"GPU samples go with one benchmark result; the output holds {len(summaries)}")
    (s,) = summaries
    return [
        LevelSummary(
            concurrency=s.concurrency,
            label=s.label,
            result=s.result,
            gpus=gpu_stats(samples.ticks),
            start_wall=s.start_wall,
            end_wall=s.end_wall,
        )
    ]


def build_document(
    summaries: list[LevelSummary],
    findings: list[Finding],
    *,
    samples: SampleSeries | None = None,
    target: str | None = None,
    comparison: dict[str, Any] | None = None,
    created: str | None = None,
    source_file: str | None = None,
) -> dict[str, Any]:
    """The one JSON document of a run (pure but for the default ``created`` timestamp)."""
    return {
        "schema": SCHEMA,
        "created": created or datetime.now(UTC).isoformat(timespec="seconds"),
        "target": target,
        "source_file": source_file,
        "sampler": None
        if samples is None
        else {
            "backend": samples.backend,
            "interval_ms": samples.interval_ms,
            "host": samples.host,
            "gpus": samples.gpus,
            "ticks": len(samples.ticks),
            "end_reason": samples.end_reason,
        },
        "levels": [
            {
                "label": s.label,
                "concurrency": s.concurrency,
                "start_wall": s.start_wall,
                "end_wall": s.end_wall,
                "status": s.result.status,
                "source": s.result.source,
                "figures": s.result.figures,
                "notes": s.result.notes,
                "server_info": s.result.server_info,
                "gpu_summary": {
                    "power_mean_w": s.power_mean_w,
                    "power_pct_of_limit": s.power_pct_of_limit,
                    "util_mean_pct": s.util_mean_pct,
                },
                "gpus": [g.to_json() for g in s.gpus],
            }
            for s in summaries
        ],
        "findings": [f.to_json() for f in findings],
        "comparison": comparison,
        "verdict": worst(findings).word,
    }


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


TABLE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("status", "status"),
    ("output_throughput_tok_s", "out tok/s"),
    ("total_throughput_tok_s", "total tok/s"),
    ("request_throughput_req_s", "req/s"),
    ("median_ttft_ms", "TTFT p50"),
    ("p99_ttft_ms", "TTFT p99"),
    ("median_tpot_ms", "TPOT p50"),
    ("p99_tpot_ms", "TPOT p99"),
    ("median_itl_ms", "ITL p50"),
    ("p99_itl_ms", "ITL p99"),
)


def render_table(doc: dict[str, Any]) -> str:
    """A text table: one row per level (throughput and latency percentiles), then per-GPU watts and utilisation."""
    head = ["level", "conc"] + [title for _, title in TABLE_COLUMNS] + ["W mean", "% limit", "util %"]
    rows = []
    for lv in doc["levels"]:
        fig = lv["figures"]
        cells = [lv["label"], _fmt(lv["concurrency"])]
        for key, _ in TABLE_COLUMNS:
            cells.append(lv["status"] if key == "status" else _fmt(fig.get(key)))
        gs = lv["gpu_summary"]
        cells += [_fmt(gs["power_mean_w"]), _fmt(gs["power_pct_of_limit"]), _fmt(gs["util_mean_pct"])]
        rows.append(cells)
    widths = [max(len(str(r[i])) for r in [head] + rows) for i in range(len(head))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=False)) for r in [head] + rows]
    gpu_lines = []
    for lv in doc["levels"]:
        for g in lv["gpus"]:
            gpu_lines.append(
                f"  {lv['label']:>8} GPU{g['index']}: {_fmt(g['power_mean_w'])} W of "
                f"{_fmt(g['power_limit_w'], 0)} W ({_fmt(g['power_pct_of_limit'])} %), util "
                f"{_fmt(g['util_gpu_mean_pct'])} %, SM {_fmt(g['sm_clock_mean_mhz'], 0)} MHz, "
                f"mem {_fmt(g['mem_used_max_mib'], 0)} MiB, n={g['samples']}"
            )
    if gpu_lines:
        lines += ["", "per GPU (mean over the level's window):"] + gpu_lines
    if doc["findings"]:
        lines += ["", "findings:"] + [f"  {f['level']:<4} {f['check']}: {f['message']}" for f in doc["findings"]]
    return "\n".join(lines) + "\n"


def write_run_dir(run_dir: Path, doc: dict[str, Any], *, plot: bool = True) -> dict[str, Path]:
    """Write ``result.json``, ``table.txt`` and (with matplotlib) ``sweep.png`` under ``run_dir``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": run_dir / "result.json", "table": run_dir / "table.txt"}
    paths["json"].write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    paths["table"].write_text(render_table(doc), encoding="utf-8")
    if plot:
        from gpuhost.bench_serving.plot import plot_sweep

        paths["plot"] = plot_sweep(doc, run_dir / "sweep.png")
    return paths
