"""Baseline comparison (an injected regression is flagged) and the findings, the seeds' 87 W case first."""

from __future__ import annotations

import copy

from gpuhost.bench_serving.compare import compare, judge
from gpuhost.bench_serving.findings import (
    FAILED_REQUESTS,
    NOT_COMPUTE_BOUND,
    REGRESSION,
    TTFT_EXPLOSION,
    all_findings,
    check_not_compute_bound,
)
from gpuhost.bench_serving.parse import BenchResult, parse_output
from gpuhost.bench_serving.results import LevelRun, build_document, summarise
from gpuhost.checks.finding import Level, registered
from tests.unit.bench_serving import seeds
from tests.unit.bench_serving.corpus import text


def _seeds_doc() -> dict:
    summaries = summarise(seeds.levels(), seeds.samples())
    return build_document(summaries, all_findings(summaries), created="x")


def test_the_87_watt_plateau_is_not_compute_bound() -> None:
    summaries = summarise(seeds.levels(), seeds.samples())
    [f] = check_not_compute_bound(summaries, "glm5-box")
    assert f.level is Level.WARN and f.check == NOT_COMPUTE_BOUND
    assert "1240.0 -> 1240.0 tok/s" in f.message and "600 W limit" in f.message and "14.7 %" in f.message
    assert "gpuhost verify p2p" in (f.fix or "")


def test_same_watts_but_throughput_still_scaling_is_only_info() -> None:
    lv = seeds.levels()
    lv[-1].result.figures["output_throughput_tok_s"] = 2480.0
    [f] = check_not_compute_bound(summarise(lv, seeds.samples()))
    assert f.level is Level.INFO


def test_every_bench_check_is_registered() -> None:
    names = set(registered())
    assert {NOT_COMPUTE_BOUND, FAILED_REQUESTS, TTFT_EXPLOSION, REGRESSION, "bench.gpu-samples"} <= names


def test_ttft_explosion_between_levels() -> None:
    a = parse_output(text("v05-glm5-fp8-c1-mtp.txt"))[0]  # median TTFT 282 ms
    b = parse_output(text("v05-glm5-fp8-c100-mtp.txt"))[0]  # median TTFT 21429 ms
    fs = [f for f in all_findings(summarise([LevelRun(1, a), LevelRun(100, b)], None)) if f.check == TTFT_EXPLOSION]
    assert len(fs) == 1 and fs[0].level is Level.WARN and "--max-running-requests" in (fs[0].fix or "")


def test_failed_and_partial_levels() -> None:
    failed = BenchResult(source="log", status="failed", notes=["no JSONL result line was written"])
    partial = parse_output(text("v04-dsv3-h200-qps1-truncated.txt"))[0]
    found = all_findings(summarise([LevelRun(64, failed), LevelRun(128, partial)], None))
    # issue 30: the truncated block is incomplete, not failed requests
    assert [(f.level, f.message) for f in found if f.check == FAILED_REQUESTS] == [
        (Level.FAIL, "c64: the benchmark run failed")
    ]
    assert [(f.level, f.message) for f in found if f.check == "bench.incomplete-result"] == [
        (Level.WARN, "c128: the result is incomplete")
    ]


def test_identical_runs_do_not_regress() -> None:
    doc = _seeds_doc()
    cmp = compare(doc, copy.deepcopy(doc))
    assert cmp["verdict"] == "no-change" and not cmp["regressions"]


def test_injected_regression_is_flagged() -> None:
    base = _seeds_doc()
    cur = copy.deepcopy(base)
    cur["levels"][2]["figures"]["output_throughput_tok_s"] = 1100.0  # -11.3 %
    cur["levels"][0]["figures"]["median_ttft_ms"] = 1200.0  # +33 %
    cur["levels"][1]["figures"]["total_throughput_tok_s"] = 2750.0  # -1.8 %: noise
    cmp = compare(cur, base)
    assert cmp["verdict"] == "regression"
    flagged = {(r["level"], r["figure"]) for r in cmp["regressions"]}
    assert flagged == {("c1024", "output_throughput_tok_s"), ("c256", "median_ttft_ms")}
    [f] = [f for f in all_findings([], cmp) if f.check == REGRESSION]
    assert f.level is Level.FAIL and "c1024 output_throughput_tok_s -11.3 %" in f.message


def test_thresholds() -> None:
    assert judge("output_throughput_tok_s", 100.0, 96.0)[1] == "same"
    assert judge("output_throughput_tok_s", 100.0, 94.0)[1] == "regression"
    assert judge("output_throughput_tok_s", 100.0, 106.0)[1] == "improvement"
    assert judge("p99_ttft_ms", 100.0, 109.0)[1] == "same"
    assert judge("p99_ttft_ms", 100.0, 111.0)[1] == "regression"
    assert judge("successful_requests", 100.0, 99.0)[1] == "regression"
    assert judge("power_mean_w", 100.0, 300.0)[1] == "info"
