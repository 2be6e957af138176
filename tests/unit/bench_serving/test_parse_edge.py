"""Formats the corpus has no public capture of (Goodput, Cache Hit Details, P90/P95 rows of 0.5.15+), failures,
and server_info redaction. The blocks here are built in the test from the format in the SGLang reference
(``"{:<40} {:<10}"`` lines, trailing spaces included); they are not captures."""

from __future__ import annotations

import json

import pytest

from gpuhost.bench_serving.parse import (
    NotBenchmarkOutput,
    parse_level,
    parse_output,
    redact_server_info,
)
from gpuhost.redact import MASK


def _line(label: str, value: object) -> str:
    v = f"{value:<10.2f}" if isinstance(value, float) else f"{value!s:<10}"
    return f"{label:<40} {v}"


def _section(title: str) -> str:
    return f"{title:-^50}"


def block_0523() -> str:
    lines = [
        "",
        f"{' Serving Benchmark Result ':=^50}",
        _line("Backend:", "sglang"),
        _line("Traffic request rate:", "inf"),
        _line("Max request concurrency:", 64),
        _line("Successful requests:", 512),
        _line("Benchmark duration (s):", 120.5),
        _line("Total input tokens:", 524288),
        _line("Total generated tokens:", 524288),
        _line("Request throughput (req/s):", 4.25),
        _line("Input token throughput (tok/s):", 4350.9),
        _line("Output token throughput (tok/s):", 4350.9),
        _line("Peak output token throughput (tok/s):", 5100.0),
        _line("Peak concurrent requests:", 64),
        _line("Total token throughput (tok/s):", 8701.8),
        _line("Concurrency:", 63.8),
        _section("Goodput"),
        _line("SLOs (ms):", "ttft:500 tpot:50"),
        _line("Request goodput (req/s):", 3.1),
        _line("SLO attainment (%):", 72.9),
        _line("TTFT SLO attainment (%):", 80.1),
        _line("TPOT SLO attainment (%):", 90.0),
        _section("End-to-End Latency"),
    ]
    for stat in ("Mean", "Median", "P90", "P95", "P99"):
        lines.append(_line(f"{stat} E2E Latency (ms):", 15000.0))
    for metric in ("Time to First Token", "Time per Output Token (excl. 1st token)", "Inter-Token Latency"):
        lines.append(_section(metric))
        short = {"Time to First Token": "TTFT", "Inter-Token Latency": "ITL"}.get(metric, "TPOT")
        for stat, v in (("Mean", 410.0), ("Median", 380.5), ("P90", 700.0), ("P95", 810.0), ("P99", 990.25)):
            lines.append(_line(f"{stat} {short} (ms):", v))
        if short == "ITL":
            lines.append(_line("Max ITL (ms):", 2500.0))
    lines += [
        _section("Cache Hit Details"),
        _line("Total prompt tokens:", 524288),
        _line("Total cached tokens:", 262144),
        _line("  Device:", 200000),
        _line("  Host:", 62144),
        _line("  Storage (file):", 0),
        _line("Cache hit rate:", "50.0%"),
        "=" * 50,
    ]
    return "\n".join(lines) + "\n"


def test_0523_block_with_goodput_cache_and_p90_p95_rows() -> None:
    text = block_0523()
    assert text.splitlines()[2].endswith(" ")  # trailing spaces, as printed
    [r] = parse_output(text)
    f = r.figures
    assert r.status == "ok" and not r.extra
    assert f["goodput_slos"] == "ttft:500 tpot:50" and f["request_goodput_req_s"] == 3.1
    assert f["slo_attainment_pct"] == 72.9 and f["ttft_slo_attainment_pct"] == 80.1
    assert f["p90_ttft_ms"] == 700.0 and f["p95_tpot_ms"] == 810.0 and f["p99_itl_ms"] == 990.25
    assert f["max_itl_ms"] == 2500.0 and f["p95_e2e_latency_ms"] == 15000.0
    assert f["cache_cached_tokens"] == 262144 and f["cache_device_tokens"] == 200000
    assert f["cache_storage_tokens"] == 0 and f["cache_hit_rate_pct"] == 50.0
    assert f["max_concurrency"] == 64 and f["request_rate"] == "inf"


def test_two_blocks_in_one_log_are_two_runs() -> None:
    results = parse_output("warmup...\n" + block_0523() + "\nnext level\n" + block_0523())
    assert [r.status for r in results] == ["ok", "ok"]


def test_failed_run_log_is_failed() -> None:
    log = (
        "Starting warmup\nError running benchmark for request rate: inf\n" + "-" * 30 + "\n"
        "UnboundLocalError: cannot access local variable 'result'\n"
    )
    [r] = parse_output(log)
    assert r.status == "failed" and r.source == "log"


def test_warmup_failure_is_failed() -> None:
    [r] = parse_output(
        "ValueError: Warmup failed - Please make sure benchmark arguments are correctly "
        "specified. Error: connection refused\n"
    )
    assert r.status == "failed"


def test_not_a_benchmark_output_raises() -> None:
    with pytest.raises(NotBenchmarkOutput):
        parse_output("hello\nworld\n")


def test_level_without_jsonl_line_is_failed_even_with_a_printed_block() -> None:
    r = parse_level(block_0523(), jsonl=None)
    assert r.status == "failed" and "no JSONL result line was written" in r.notes
    assert r.figures["output_throughput_tok_s"] == 4350.9  # what was printed is kept for the record


def test_level_with_jsonl_uses_it_and_fills_from_printed() -> None:
    line = json.dumps(
        {
            "backend": "sglang",
            "completed": 512,
            "duration": 120.51,
            "output_throughput": 4350.93,
            "server_info": {"api_key": "sk-very-secret", "tp_size": 8},
        }
    )
    r = parse_level(block_0523(), jsonl=line + "\n")
    assert r.source == "jsonl" and r.status == "ok"
    assert r.figures["output_throughput_tok_s"] == 4350.93  # JSONL precision wins
    assert r.figures["p90_ttft_ms"] == 700.0  # the printed block fills the rest
    assert r.server_info == {"api_key": MASK, "tp_size": 8}


def test_server_info_is_redacted_everywhere() -> None:
    info = {
        "api_key": "sk-live-123456",
        "admin_api_key": "adm-987654",
        "hf_token": None,
        "tp_size": 8,
        "launch_command": "sglang serve --model-path m --api-key sk-live-123456 --port 30000",
        "internal_states": [{"avg_spec_accept_length": 3.4, "watermark_secret_key": "w-abcdef"}],
    }
    out = redact_server_info(info)
    dumped = json.dumps(out)
    assert "sk-live-123456" not in dumped and "adm-987654" not in dumped and "w-abcdef" not in dumped
    assert out["tp_size"] == 8 and out["hf_token"] is None
    assert out["launch_command"].endswith(f"--api-key {MASK} --port 30000")
    assert out["internal_states"][0]["avg_spec_accept_length"] == 3.4
    assert info["api_key"] == "sk-live-123456"  # a copy; the input is untouched


def test_jsonl_record_keeps_no_secret_and_counts_errors() -> None:
    line = json.dumps(
        {
            "backend": "sglang",
            "completed": 3,
            "duration": 1.0,
            "output_throughput": 10.0,
            "request_rate": float("inf"),
            "max_concurrency": None,
            "server_info": {"api_key": "abcd-secret"},
            "errors": ["", "timeout", ""],
        }
    )
    [r] = parse_output(line)
    assert r.figures["request_rate"] == "inf" and r.figures["max_concurrency"] is None
    assert r.extra["error_count"] == 1
    assert "abcd-secret" not in json.dumps(r.to_json())
