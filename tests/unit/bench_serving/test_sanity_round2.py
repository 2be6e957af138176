"""bench_serving figures a streaming client cannot produce are not a PASS, and a truncated block is not failed
requests (issue 30). Real captures: tests/fixtures/sglang/bench/SOURCE.md."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from gpuhost.bench_serving.findings import FAILED_REQUESTS, FIGURES_SANE, INCOMPLETE, TOKEN_COUNTS, all_findings
from gpuhost.bench_serving.parse import parse_output
from gpuhost.bench_serving.results import LevelRun, summarise
from gpuhost.checks.finding import Level
from gpuhost.cli.app import _register, app
from tests.unit.bench_serving.corpus import fixture, text

_register()


def _findings(name: str):
    results = parse_output(text(name))
    return all_findings(summarise([LevelRun(i + 1, r) for i, r in enumerate(results)], None))


def test_dlora_block_zero_itl_negative_tpot_is_flagged_with_each_reason():
    (f,) = [f for f in _findings("pre04-dlora-vs-zero-itl-negative-tpot.txt") if f.check == FIGURES_SANE]
    assert f.level is Level.WARN
    assert "inter-token latency 0 ms at 255 tokens per request" in f.message  # 25466 tokens / 100 requests
    assert "mean TTFT 1944 ms is the whole request (1974 ms)" in f.message
    assert "median TPOT -0.00 ms is negative" in f.message
    assert "P99 TPOT 27.75 ms is above every inter-token gap (P99 ITL 0.00 ms)" in f.message


def test_the_older_dlora_block_of_the_corpus_is_flagged_too():
    (f,) = [f for f in _findings("pre04-dlora-rate2.txt") if f.check == FIGURES_SANE]
    assert "inter-token latency 0 ms" in f.message


def test_wrapped_jsonl_line_with_zero_ttft_and_itl_is_read_and_flagged():
    [r] = parse_output(text("sglang-12389-zero-ttft-itl-jsonl-wrapped.jsonl"))
    assert r.source == "jsonl" and r.figures["successful_requests"] == 300
    (f,) = [f for f in _findings("sglang-12389-zero-ttft-itl-jsonl-wrapped.jsonl") if f.check == FIGURES_SANE]
    assert "inter-token latency 0 ms at 1000 tokens per request" in f.message
    assert "TTFT 0 ms" in f.message and "0 retokenized tokens" in f.message


def test_vllm_omni_block_with_tpot_and_itl_zero_at_fifteen_tokens_per_request_is_flagged():
    # 2351548518/vllm-omni (SOURCE.md): vLLM-Omni's `vllm bench serve --omni`, MiniCPM-o 4.5 speaking on an Ascend
    # 910C, 32 requests one at a time: 481 text tokens (15 per request), TPOT and ITL 0.00 at mean, median and P99,
    # though a request took 2577 ms (mean E2EL) against a first token at 548 ms: the text reached the client at once
    name = "vllm-omni-minicpmo45-seedtts-910c-zero-tpot-itl.txt"
    [r] = parse_output(text(name))
    assert r.status == "ok"
    f = r.figures
    assert (f["successful_requests"], f["total_output_tokens"], f["max_concurrency"]) == (32, 481, 1)
    assert (f["mean_ttft_ms"], f["median_ttft_ms"], f["p99_ttft_ms"]) == (547.77, 546.64, 790.99)
    assert (f["mean_e2e_latency_ms"], f["median_e2e_latency_ms"], f["p99_e2e_latency_ms"]) == (
        2577.33,
        2596.07,
        3356.65,
    )
    assert (f["mean_tpot_ms"], f["median_tpot_ms"], f["p99_tpot_ms"]) == (0.0, 0.0, 0.0)
    assert (f["mean_itl_ms"], f["median_itl_ms"], f["p99_itl_ms"]) == (0.0, 0.0, 0.0)
    assert f["output_throughput_tok_s"] == 5.83 and f["peak_concurrent_requests"] == 2.0  # printed twice, both 2.00
    assert r.extra["failed_requests"] == "0" and r.extra["mean_audio_ttfp_ms"] == "1464.35"  # not SGLang figures
    found = _findings(name)
    (s,) = [x for x in found if x.check == FIGURES_SANE]
    assert s.level is Level.WARN
    assert "TPOT 0 ms at 15 tokens per request" in s.message  # 481 / 32
    assert "inter-token latency 0 ms at 15 tokens per request" in s.message
    assert "negative" not in s.message and "is the whole request" not in s.message  # 548 ms of 2577 ms
    assert not [x for x in found if x.level is Level.FAIL or x.check == INCOMPLETE]
    cli = CliRunner().invoke(app, ["bench", "sglang", "--parse", str(fixture(name)), "--json"])
    assert cli.exit_code == 0, cli.output
    assert [x["level"] for x in json.loads(cli.output)["findings"] if x["check"] == FIGURES_SANE] == ["WARN"]


def test_tpot_zero_is_not_flagged_at_one_token_per_request():
    # constructed, not a capture: the real GLM-5 block (SOURCE.md) with its TPOT lines set to 0.00 and one token
    # counted per request, as a prefill-only run prints them: a single token has no time per output token
    block = text("v05-glm5-fp8-c1-mtp.txt")
    for label in ("Mean TPOT (ms):", "Median TPOT (ms):", "P99 TPOT (ms):"):
        line = next(ln for ln in block.splitlines() if ln.startswith(label))
        block = block.replace(line, f"{label:<40} 0.00")
    (r,) = parse_output(block)
    r.figures["total_output_tokens"] = r.figures["successful_requests"]
    found = all_findings(summarise([LevelRun(1, r)], None))
    assert not [x for x in found if x.check == FIGURES_SANE and "TPOT 0 ms" in x.message]


def test_healthy_blocks_pass_the_sanity_check():
    for name in ("v05-glm5-fp8-c1-mtp.txt", "v04-dsv3-h200-qps8-typo.txt", "v05-r1distill-rate20-c64.txt"):
        assert not [f for f in _findings(name) if f.check == FIGURES_SANE], name


def test_truncated_block_is_incomplete_not_failed_requests():
    found = _findings("v04-dsv3-h200-qps1-truncated.txt")
    assert not [f for f in found if f.check == FAILED_REQUESTS]
    (f,) = [f for f in found if f.check == INCOMPLETE]
    assert f.level is Level.WARN and f.cause and "closing" in f.cause


def test_a_second_cut_block_vllm_no_closing_line_is_incomplete_not_failed():
    # a Vietnamese explainer of a vLLM benchmark_serving run (SOURCE.md): the pasted block stops after P99 ITL,
    # without its closing '=====' line; 1000 requests all succeeded, none failed, and every figure is there
    found = _findings("vllm-bench-vi-explainer-no-closing-line-truncated.txt")
    assert not [f for f in found if f.check == FAILED_REQUESTS]
    (f,) = [f for f in found if f.check == INCOMPLETE]
    assert f.level is Level.WARN and f.cause and "closing" in f.cause
    [r] = parse_output(text("vllm-bench-vi-explainer-no-closing-line-truncated.txt"))
    assert r.status == "partial" and r.figures["successful_requests"] == 1000
    assert (r.figures["output_throughput_tok_s"], r.figures["p99_itl_ms"]) == (500.70, 36.52)
    r2 = CliRunner().invoke(
        app, ["bench", "sglang", "--parse", str(fixture("vllm-bench-vi-explainer-no-closing-line-truncated.txt"))]
    )
    assert r2.exit_code == 0, r2.output
    assert "WARN bench.incomplete-result" in r2.output and "failed" not in r2.output


def test_cli_reports_the_warning_and_exits_0():
    r = CliRunner().invoke(
        app, ["bench", "sglang", "--parse", str(fixture("pre04-dlora-vs-zero-itl-negative-tpot.txt")), "--json"]
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert any(f["check"] == FIGURES_SANE and f["level"] == "WARN" for f in doc["findings"])


def test_asked_length_counted_as_generated_is_a_warning_with_the_real_throughput():
    # DeepLink-org/AIChipBenchmark: lmdeploy behind sglang.bench_serving, 2000 requests of 2048 asked tokens; the
    # server sent no usage, so bench_serving counted 2000 x 2048 = 4096000; the text holds 833623 (4.9x fewer)
    found = _findings("aichip-lmdeploy-dsr1-asked-length-retokenized-fifth.txt")
    (f,) = [f for f in found if f.check == TOKEN_COUNTS]
    assert f.level is Level.WARN
    assert "4096000 tokens counted but the text retokenizes to 833623 (4.9x fewer)" in f.message
    assert "by the text, output throughput is 6558 tok/s" in f.message  # 833623 / 127.11 s
    assert f.cause and "exactly 2048 tokens" in f.cause and "asked for" in f.cause
    assert not [f for f in found if f.level is Level.FAIL]


def test_chat_backend_on_a_reasoning_model_drops_the_reasoning_text():
    # sgl-project/sgl-cookbook GLM-4.6V: --backend sglang-oai-chat, 66020 counted, 31037 retokenized (2.1x fewer);
    # the same page shows the server splitting reasoning_content off content
    (f,) = [f for f in _findings("v05-glm46v-oai-chat-image-retokenized-half.txt") if f.check == TOKEN_COUNTS]
    assert f.level is Level.WARN and "(2.1x fewer)" in f.message
    assert f.cause and "sglang-oai-chat" in f.cause and "reasoning" in f.cause
    assert f.fix and "--backend sglang" in f.fix


def test_the_dlora_fork_block_counts_more_tokens_than_its_text_holds():
    (f,) = [f for f in _findings("pre04-dlora-vs-zero-itl-negative-tpot.txt") if f.check == TOKEN_COUNTS]
    assert "25466 tokens counted but the text retokenizes to 10592 (2.4x fewer)" in f.message


def test_counts_within_a_factor_of_two_are_not_flagged():
    # 21513 / 21500 and 6453 / 6434 style blocks: the corpus's healthy ones
    for name in ("v05-glm5-fp8-c1-mtp.txt", "v04-dsv3-h200-qps8-typo.txt", "v05-r1distill-rate20-c64.txt"):
        assert not [f for f in _findings(name) if f.check == TOKEN_COUNTS], name


def test_cli_reads_the_crlf_block_and_exits_0_with_the_warning():
    r = CliRunner().invoke(
        app,
        [
            "bench",
            "sglang",
            "--parse",
            str(fixture("aichip-lmdeploy-dsr1-asked-length-retokenized-fifth.txt")),
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert [f["level"] for f in doc["findings"] if f["check"] == TOKEN_COUNTS] == ["WARN"]
