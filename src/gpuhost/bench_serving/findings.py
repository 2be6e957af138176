"""What a sweep means, as findings of the shared check model. Each check is a pure function of the level summaries.

Thresholds:

- *plateau*: from one level to the next (concurrency at least 1.5x higher) output throughput grows by less than 15 %;
- *far below the power limit*: the GPUs' mean draw at the top level is under 50 % of their limit (FAIL-worthy
  evidence is left to ``gpuhost verify p2p``; this check only WARNs);
- *TTFT explosion*: median TTFT at least 4x the previous level's and above 1 s.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from gpuhost.bench_serving.results import LevelSummary
from gpuhost.checks.finding import Finding, Level, check

PLATEAU_GAIN_PCT = 15.0
PLATEAU_MIN_CONCURRENCY_STEP = 1.5
LOW_POWER_PCT = 50.0
TTFT_JUMP_FACTOR = 4.0
TTFT_JUMP_MIN_MS = 1000.0

NOT_COMPUTE_BOUND = "bench.not-compute-bound"
FAILED_REQUESTS = "bench.failed-requests"
TTFT_EXPLOSION = "bench.ttft-explosion"
GPU_SAMPLES = "bench.gpu-samples"
REGRESSION = "bench.regression"


def _ordered(summaries: list[LevelSummary]) -> list[LevelSummary]:
    if all(s.concurrency is not None for s in summaries):
        return sorted(summaries, key=lambda s: s.concurrency or 0)
    return list(summaries)


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@check(
    NOT_COMPUTE_BOUND,
    title="Throughput plateaus while the GPUs idle below their power limit",
    group="bench",
    meaning="More concurrency no longer buys throughput, yet the GPUs draw a small share of their power limit: "
    "the bottleneck is not GPU compute but the path between GPUs (P2P off, all-reduce staged through "
    "host memory), the CPU or the scheduler.",
    fix="Run `gpuhost verify p2p` on the host; check custom all-reduce and NCCL_P2P_LEVEL; watch CPU load of "
    "the scheduler and tokenizer processes.",
)
def check_not_compute_bound(summaries: list[LevelSummary], target: str = "server") -> list[Finding]:
    levels = [s for s in _ordered(summaries) if s.result.status != "failed"]
    if not levels:
        return []
    top = levels[-1]
    pct = top.power_pct_of_limit
    if pct is None:
        return []
    plateau = None
    out_top = _num(top.figure("output_throughput_tok_s"))
    for prev in reversed(levels[:-1]):
        out_prev = _num(prev.figure("output_throughput_tok_s"))
        if out_prev is None or out_top is None or out_prev <= 0:
            continue
        if prev.concurrency and top.concurrency and top.concurrency / prev.concurrency < PLATEAU_MIN_CONCURRENCY_STEP:
            continue
        gain = 100.0 * (out_top - out_prev) / out_prev
        plateau = (prev, gain)
        break
    watts = top.power_mean_w
    limits = [g.power_limit_w for g in top.gpus if g.power_limit_w]
    limit = max(limits) if limits else None
    seen = (
        (
            f"at {top.label} the {len(top.gpus)} GPU(s) drew {watts} W on average of a {limit:.0f} W limit "
            f"({pct:.1f} %), utilisation {top.util_mean_pct} %"
        )
        if limit
        else f"power {pct:.1f} % of limit"
    )
    if plateau is not None and plateau[1] < PLATEAU_GAIN_PCT and pct < LOW_POWER_PCT:
        prev, gain = plateau
        return [
            Finding(
                Level.WARN,
                NOT_COMPUTE_BOUND,
                target,
                f"output throughput {prev.figure('output_throughput_tok_s')} -> {out_top} tok/s "
                f"({gain:+.1f} %) from {prev.label} to {top.label} while {seen}: not compute-bound",
                cause="the GPUs wait on something else: peer-to-peer disabled or all-reduce going through "
                "host memory, or the CPU/scheduler cannot feed them",
                fix="gpuhost verify p2p; check NCCL_P2P_LEVEL / custom all-reduce; check CPU-bound "
                "scheduler or tokenizer (--tokenizer-worker-num), --max-running-requests cap",
            )
        ]
    if pct < LOW_POWER_PCT:
        return [
            Finding(
                Level.INFO,
                NOT_COMPUTE_BOUND,
                target,
                f"{seen}; throughput still scales, so more concurrency may still pay",
            )
        ]
    return [Finding(Level.PASS, NOT_COMPUTE_BOUND, target, seen)]


@check(
    FAILED_REQUESTS,
    title="Benchmark runs failed or requests failed",
    group="bench",
    meaning="A level produced no result (no JSONL line, the benchmark's own error lines) or lost requests, so "
    "its figures describe something other than the load asked for.",
    fix="Read the level's log; check the server's health and its log for OOM or watchdog lines.",
)
def check_failed_requests(summaries: list[LevelSummary], target: str = "server") -> list[Finding]:
    out = []
    for s in summaries:
        r = s.result
        if r.status == "failed":
            out.append(
                Finding(
                    Level.FAIL,
                    FAILED_REQUESTS,
                    target,
                    f"{s.label}: the benchmark run failed",
                    cause="; ".join(r.notes) or None,
                    fix="look at the server log for the level's time window; rerun the level alone",
                )
            )
        elif r.status == "partial":
            out.append(
                Finding(
                    Level.WARN,
                    FAILED_REQUESTS,
                    target,
                    f"{s.label}: the result is incomplete",
                    cause="; ".join(r.notes) or None,
                )
            )
        errors = r.extra.get("error_count")
        if isinstance(errors, int) and errors > 0:
            out.append(
                Finding(
                    Level.FAIL,
                    FAILED_REQUESTS,
                    target,
                    f"{s.label}: {errors} request(s) failed",
                    fix="see the JSONL 'errors' list (--output-details)",
                )
            )
    return out


@check(
    TTFT_EXPLOSION,
    title="Time to first token explodes at a concurrency level",
    group="bench",
    meaning="Requests queue instead of being scheduled: the KV cache is full (or the running-request cap is "
    "hit), so new requests wait for others to finish.",
    fix="Cap --max-running-requests near the knee, give the KV cache more memory (--mem-fraction-static), "
    "tune --chunked-prefill-size, or treat the previous level as the usable maximum.",
)
def check_ttft_explosion(summaries: list[LevelSummary], target: str = "server") -> list[Finding]:
    out = []
    levels = [s for s in _ordered(summaries) if s.result.status != "failed"]
    for prev, cur in pairwise(levels):
        a, b = _num(prev.figure("median_ttft_ms")), _num(cur.figure("median_ttft_ms"))
        if a is None or b is None or a <= 0:
            continue
        if b >= TTFT_JUMP_FACTOR * a and b >= TTFT_JUMP_MIN_MS:
            out.append(
                Finding(
                    Level.WARN,
                    TTFT_EXPLOSION,
                    target,
                    f"median TTFT {a:.0f} ms at {prev.label} -> {b:.0f} ms at {cur.label} ({b / a:.1f}x)",
                    cause="requests queue: KV cache exhausted or --max-running-requests reached",
                    fix="--max-running-requests near the knee; more KV memory (--mem-fraction-static); "
                    "check the server log's '#queue-req' and 'token usage'",
                )
            )
    return out


@check(
    GPU_SAMPLES,
    title="GPU samples cover each level",
    group="bench",
    meaning="Without samples in a level's window the sweep cannot say what the GPUs did there.",
    fix="Check that the sampler ran on the target for the whole sweep and that its clock agrees with the "
    "benchmark host's (pass the clock offset).",
)
def check_gpu_samples(summaries: list[LevelSummary], target: str = "server") -> list[Finding]:
    out = []
    for s in summaries:
        if s.start_wall is not None and not s.gpus:
            out.append(Finding(Level.WARN, GPU_SAMPLES, target, f"{s.label}: no GPU sample inside the level's window"))
        elif s.gpus and min(g.samples for g in s.gpus) < 4:
            out.append(
                Finding(
                    Level.INFO,
                    GPU_SAMPLES,
                    target,
                    f"{s.label}: only {min(g.samples for g in s.gpus)} sample(s) per GPU",
                )
            )
    return out


@check(
    REGRESSION,
    title="Regression against the baseline run",
    group="bench",
    meaning="A figure moved past its threshold in the wrong direction compared with the baseline.",
    fix="Compare the two runs' server_info and versions; bisect the change.",
)
def check_regression(comparison: dict[str, Any] | None, target: str = "server") -> list[Finding]:
    if not comparison:
        return []
    regs = comparison.get("regressions") or []
    if not regs:
        return [
            Finding(Level.PASS, REGRESSION, target, f"no regression against the baseline ({comparison['verdict']})")
        ]
    shown = ", ".join(f"{r['level']} {r['figure']} {r['change_pct']:+.1f} %" for r in regs[:6])
    return [
        Finding(
            Level.FAIL,
            REGRESSION,
            target,
            f"{len(regs)} figure(s) regressed: {shown}",
            cause=f"thresholds: throughput -{comparison['thresholds']['throughput_drop_pct']} %, "
            f"latency +{comparison['thresholds']['latency_rise_pct']} %",
        )
    ]


def all_findings(
    summaries: list[LevelSummary], comparison: dict[str, Any] | None = None, target: str = "server"
) -> list[Finding]:
    """Every bench check, in a fixed order."""
    return (
        check_failed_requests(summaries, target)
        + check_not_compute_bound(summaries, target)
        + check_ttft_explosion(summaries, target)
        + check_gpu_samples(summaries, target)
        + check_regression(comparison, target)
    )
