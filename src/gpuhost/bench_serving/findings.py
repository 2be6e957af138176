"""What a sweep means, as findings of the shared check model. Each check is a pure function of the level summaries.

Thresholds:

- *plateau*: from one level to the next (concurrency at least 1.5x higher) output throughput grows by less than 15 %;
- *far below the power limit*: the GPUs' mean draw at the top level is under 50 % of their limit (FAIL-worthy
  evidence is left to ``gpuhost verify p2p``; this check only WARNs);
- *TTFT explosion*: median TTFT at least 4x the previous level's and above 1 s.
"""

from __future__ import annotations

import math
from itertools import pairwise
from typing import Any

from gpuhost.bench_serving.results import LevelSummary
from gpuhost.checks.finding import Finding, Level, check
from gpuhost.checks.serve import running_bound

PLATEAU_GAIN_PCT = 15.0
PLATEAU_MIN_CONCURRENCY_STEP = 1.5
LOW_POWER_PCT = 50.0
TTFT_JUMP_FACTOR = 4.0
TTFT_JUMP_MIN_MS = 1000.0

NOT_COMPUTE_BOUND = "bench.not-compute-bound"
FAILED_REQUESTS = "bench.failed-requests"
TTFT_EXPLOSION = "bench.ttft-explosion"
GPU_SAMPLES = "bench.gpu-samples"
ADMISSION = "bench.admission-bound"
REGRESSION = "bench.regression"
INCOMPLETE = "bench.incomplete-result"
FIGURES_SANE = "bench.figures-sane"
TOKEN_COUNTS = "bench.token-counts"

#: the text that came back retokenizes to under half (or over twice) the tokens counted. Of the 171 printed blocks in
#: sgl-project/sgl-cookbook's docs (7b5bd9c), 158 are within 10 % and one is outside a factor of two (GLM-4.6V through
#: a chat backend: tests/fixtures/sglang/bench/SOURCE.md)
RETOKENIZED_RATIO = 2.0
#: backends whose client keeps only the chat answer (``delta.content``), never the reasoning text
#: (sglang/bench_serving.py ``async_request_openai_chat_completions``)
_CHAT_BACKENDS = ("sglang-oai-chat", "vllm-chat", "lmdeploy-chat", "openai-chat")


def _stats(s: LevelSummary, metric: str) -> dict[str, float]:
    """The mean, median and P99 of ``metric`` (``itl``, ``tpot``) that the level's result gives, in that order."""
    got = {k: _num(s.figure(f"{k}_{metric}_ms")) for k in ("mean", "median", "p99")}
    return {k: v for k, v in got.items() if v is not None}


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
    INCOMPLETE,
    title="A benchmark result is incomplete",
    group="bench",
    meaning="The printed block was cut (no closing '=====' line) or lacks a core figure: what is there is kept, "
    "but the level is not fully described. No request failed because of it.",
    fix="Save the whole output (or the --output-file JSONL line) and read it again.",
)
def check_incomplete(summaries: list[LevelSummary], target: str = "server") -> list[Finding]:
    return [
        Finding(
            Level.WARN,
            INCOMPLETE,
            target,
            f"{s.label}: the result is incomplete",
            cause="; ".join(s.result.notes) or None,
            fix="read the complete output or the JSONL line",
        )
        for s in summaries
        if s.result.status == "partial"
    ]


@check(
    FIGURES_SANE,
    title="The latency and token figures are physically possible",
    group="bench",
    meaning="Figures a streaming client cannot produce: inter-token latency 0 with many tokens per request, TTFT "
    "equal to the whole request, a negative TPOT or a TPOT of 0 with many tokens per request, TPOT far above every "
    "inter-token gap, or no text at all. The "
    "client did not see tokens arrive one by one (no streaming, a buffering proxy, a backend or bench fork that "
    "returns the answer at once): the latency figures do not describe the server.",
    fix="Benchmark with streaming on (drop --disable-stream; a proxy must not buffer), the SGLang bench_serving "
    "of the server's version, and the model's tokenizer (--tokenizer).",
)
def check_figures_sane(summaries: list[LevelSummary], target: str = "server") -> list[Finding]:
    out: list[Finding] = []
    for s in summaries:
        if s.result.status == "failed":
            continue
        seen: list[str] = []
        requests = _num(s.figure("successful_requests"))
        generated = _num(s.figure("total_output_tokens"))
        per_request = generated / requests if generated is not None and requests else None
        many = per_request is not None and per_request > 1.5  # requests that spend time after their first token
        itl, tpot = _stats(s, "itl"), _stats(s, "tpot")
        if itl and many and not any(itl.values()):
            seen.append(f"inter-token latency 0 ms at {per_request:.0f} tokens per request")
        ttft, e2e = _num(s.figure("mean_ttft_ms")), _num(s.figure("mean_e2e_latency_ms"))
        if ttft == 0 and per_request:
            seen.append("TTFT 0 ms")
        elif ttft and e2e and per_request and per_request > 1.5 and ttft >= 0.95 * e2e:
            seen.append(f"mean TTFT {ttft:.0f} ms is the whole request ({e2e:.0f} ms)")
        negative = [(k, v) for k, v in tpot.items() if math.copysign(1.0, v) < 0]  # -0.00 as printed is too
        if negative:
            seen.append(f"{negative[0][0]} TPOT {negative[0][1]:.2f} ms is negative")
        elif tpot and many and not any(tpot.values()):  # TPOT cannot be 0 at every statistic either
            seen.append(f"TPOT 0 ms at {per_request:.0f} tokens per request")
        p99_tpot, p99_itl = _num(s.figure("p99_tpot_ms")), _num(s.figure("p99_itl_ms"))
        if p99_tpot and p99_itl is not None and p99_tpot > 3 * p99_itl:
            seen.append(f"P99 TPOT {p99_tpot:.2f} ms is above every inter-token gap (P99 ITL {p99_itl:.2f} ms)")
        if _num(s.figure("total_output_tokens_retokenized")) == 0 and generated:
            seen.append("the client got no text back (0 retokenized tokens)")
        if seen:
            out.append(
                Finding(
                    Level.WARN,
                    FIGURES_SANE,
                    target,
                    f"{s.label}: " + "; ".join(seen) + ": the latency figures do not describe the server",
                    cause="the client did not see the tokens arrive one by one (streaming off, a buffering proxy, a "
                    "bench that returns the answer at once) or counted them with another tokenizer",
                    fix="rerun with streaming on, the bench_serving of the server's SGLang version and the model's "
                    "tokenizer",
                )
            )
    return out


def _token_count_cause(s: LevelSummary, generated: float, requests: float | None) -> tuple[str, str]:
    backend = s.figure("backend")
    if requests and requests >= 10 and generated == int(generated) and int(generated) % int(requests) == 0:
        per = int(generated) // int(requests)
        return (
            f"every request counted exactly {per} tokens: the client counted the length it asked for, because the "
            "server sent no usage figures with its stream (bench_serving keeps the asked length then); the "
            "retokenized count is what came back",
            "read the retokenized count as the output; use a backend whose server reports usage (--backend sglang) "
            "or have the server honour ignore_eos",
        )
    if isinstance(backend, str) and backend in _CHAT_BACKENDS:
        return (
            f"the {backend} client keeps only the answer text, not the reasoning text the server also generated "
            "(a reasoning parser splits it off), so fewer tokens come back than were counted",
            "bench with --backend sglang (the native /generate text) or without the reasoning parser",
        )
    return (
        "the text that came back does not hold the tokens the server counted: another tokenizer on the client, "
        "special or stop tokens dropped from the text, or the text cut",
        "bench with the model's tokenizer (--tokenizer) and read a few outputs (--output-details)",
    )


@check(
    TOKEN_COUNTS,
    title="The tokens counted match the text that came back",
    group="bench",
    meaning="bench_serving counts each request's output twice: the server's (or the asked) token count, which the "
    "throughput figures use, and the retokenized length of the text it received. A factor of two between them "
    "means the throughput counts tokens the text does not hold (the asked length counted, the reasoning text "
    "dropped by a chat client, another tokenizer).",
    fix="Read a few outputs (--output-details); bench with the native backend and the model's tokenizer.",
)
def check_token_counts(summaries: list[LevelSummary], target: str = "server") -> list[Finding]:
    out: list[Finding] = []
    for s in summaries:
        if s.result.status == "failed":
            continue
        generated = _num(s.figure("total_output_tokens"))
        retok = _num(s.figure("total_output_tokens_retokenized"))
        if not generated or not retok:  # no text at all is the figures-sane check's
            continue
        ratio = retok / generated
        if 1 / RETOKENIZED_RATIO <= ratio <= RETOKENIZED_RATIO:
            continue
        factor = ratio if ratio > 1 else 1 / ratio
        fewer = "fewer" if ratio < 1 else "more"
        duration = _num(s.figure("duration_s"))
        real = f"; by the text, output throughput is {retok / duration:.0f} tok/s" if duration else ""
        cause, fix = _token_count_cause(s, generated, _num(s.figure("successful_requests")))
        out.append(
            Finding(
                Level.WARN,
                TOKEN_COUNTS,
                target,
                f"{s.label}: {generated:.0f} tokens counted but the text retokenizes to {retok:.0f} "
                f"({factor:.1f}x {fewer}){real}: the output throughput counts tokens the text does not hold",
                cause=cause,
                fix=fix,
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


def admission_bound(summary: LevelSummary) -> int | None:
    """The server's running-request bound from the level's ``server_info`` (``checks.serve.running_bound``)."""
    return running_bound(summary.result.server_info or {})


@check(
    ADMISSION,
    title="Concurrency levels above the server's running-request bound",
    group="bench",
    meaning="SGLang runs at most --max-running-requests requests at once; the rest wait in its queue. A level "
    "whose concurrency is above that bound measures the queue (TTFT grows, throughput stays flat), not the "
    "server at that concurrency.",
    fix="Raise --max-running-requests above the sweep's top level (the seeds' 64 cap was their 880 tok/s "
    "plateau; 1024 reached 3,740 tok/s), or read the levels above the bound as queueing.",
)
def check_admission(summaries: list[LevelSummary], target: str = "server") -> list[Finding]:
    out = []
    for s in _ordered(summaries):
        bound = admission_bound(s)
        if bound is None or s.concurrency is None or s.result.status == "failed":
            continue
        if s.concurrency > bound:
            out.append(
                Finding(
                    Level.WARN,
                    ADMISSION,
                    target,
                    f"{s.label}: {s.concurrency} concurrent requests against a server that runs at most {bound}: "
                    f"{s.concurrency - bound} of them queue",
                    cause=f"--max-running-requests {bound}",
                    fix=f"raise --max-running-requests above {s.concurrency}, or treat c{bound} as the top level",
                )
            )
    if not out and any(admission_bound(s) is not None for s in summaries):
        bounds = sorted({b for b in (admission_bound(s) for s in summaries) if b is not None})
        out.append(
            Finding(
                Level.PASS,
                ADMISSION,
                target,
                f"every level within the server's running-request bound ({', '.join(map(str, bounds))})",
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
        + check_incomplete(summaries, target)
        + check_figures_sane(summaries, target)
        + check_token_counts(summaries, target)
        + check_not_compute_bound(summaries, target)
        + check_ttft_explosion(summaries, target)
        + check_admission(summaries, target)
        + check_gpu_samples(summaries, target)
        + check_regression(comparison, target)
    )
