"""The seeds' 87 W case as test data: the sweep table and the one nvidia-smi reading of the story
(GLM-5-NVFP4 on 8x RTX PRO 6000, 600 W limit). Output tok/s at 256 is the story's "~700"."""

from __future__ import annotations

from gpuhost.bench_serving.parse import BenchResult
from gpuhost.bench_serving.results import LevelRun
from gpuhost.bench_serving.samples import SampleSeries, Tick

# concurrency: (total tok/s, output tok/s), from the seeds' table
SWEEP = {256: (1950.0, 700.0), 512: (2800.0, 1240.0), 1024: (3740.0, 1240.0)}
# nvidia-smi --query-gpu=index,utilization.gpu,power.draw at 1024, from the seeds
WATTS = [87.92, 89.24, 85.91, 86.60, 89.38, 88.11, 90.07, 85.52]
LIMIT_W = 600.0


def levels() -> list[LevelRun]:
    out = []
    for n, (conc, (total, output)) in enumerate(sorted(SWEEP.items())):
        r = BenchResult(
            source="printed",
            status="ok",
            figures={
                "max_concurrency": conc,
                "successful_requests": conc * 2,
                "duration_s": 300.0,
                "total_throughput_tok_s": total,
                "output_throughput_tok_s": output,
                "median_ttft_ms": 900.0 + n,
            },
        )
        out.append(LevelRun(concurrency=conc, result=r, start_wall=1000.0 + 400 * n, end_wall=1300.0 + 400 * n))
    return out


def samples() -> SampleSeries:
    ticks = []
    for n in range(3):
        for k in range(600):  # 2 Hz over each 300 s level
            t = 1000.0 + 400 * n + k * 0.5
            ticks.append(
                Tick(
                    t,
                    t - 900.0,
                    tuple(
                        {"index": i, "power_w": w, "power_limit_w": LIMIT_W, "util_gpu_pct": 0, "sm_clock_mhz": 2430}
                        for i, w in enumerate(WATTS)
                    ),
                )
            )
    return SampleSeries(backend="nvidia-smi", interval_ms=500, gpus=[{"index": i} for i in range(8)], ticks=ticks)
