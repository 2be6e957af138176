"""The printed result block, with expected figures, notes and statuses written here by hand.

The blocks are the real 0.5.x capture ``v05-glm5-fp8-c1-mtp.txt`` (SOURCE.md), whole or with one line changed the
way a user meets it: the output cut off, a figure SGLang prints as ``N/A``, a run where no request succeeded."""

from __future__ import annotations

from gpuhost.bench_serving.parse import parse_printed_block, split_printed_blocks
from tests.unit.bench_serving.corpus import text

C1 = text("v05-glm5-fp8-c1-mtp.txt")


def block(raw: str) -> list[str]:
    (b,) = split_printed_blocks(raw)
    return b


def test_the_whole_real_block_is_ok_without_notes() -> None:
    r = parse_printed_block(block(C1))
    assert (r.source, r.status, r.notes, r.extra) == ("printed", "ok", [], {})
    assert r.figures["backend"] == "sglang" and r.figures["request_rate"] == "inf"
    assert r.figures["successful_requests"] == 10 and isinstance(r.figures["successful_requests"], int)
    assert r.figures["concurrency"] == 1.0 and isinstance(r.figures["concurrency"], float)  # a mean, not a count
    assert r.figures["p90_e2e_latency_ms"] == 5908.97 and r.figures["max_itl_ms"] == 29.5


def test_a_block_cut_off_is_partial_and_says_why() -> None:
    cut = C1.rsplit("=" * 50, 1)[0]
    r = parse_printed_block(block(cut))
    assert r.status == "partial" and r.notes == ["the block has no closing '=====' line (output cut off)"]
    assert r.figures["max_itl_ms"] == 29.5  # what was printed before the cut is kept


def test_a_block_without_a_core_figure_is_partial_naming_it() -> None:
    r = parse_printed_block(block(C1.replace("Benchmark duration (s):                  35.78\n", "")))
    assert r.status == "partial" and r.notes == ["missing core figures: duration_s"]
    two = parse_printed_block(block(C1.replace("35.78", "N/A").replace("117.96", "not set")))
    assert two.notes == ["missing core figures: duration_s, output_throughput_tok_s"]
    assert two.figures["duration_s"] is None and two.figures["output_throughput_tok_s"] is None


def test_no_successful_request_is_a_failed_run() -> None:
    r = parse_printed_block(block(C1.replace("Successful requests:                     10", "Successful requests: 0")))
    assert r.status == "failed" and r.notes == ["no request succeeded"]
    one = parse_printed_block(
        block(C1.replace("Successful requests:                     10", "Successful requests: 1"))
    )
    assert one.status == "ok"


def test_a_label_printed_twice_keeps_the_first_and_an_unknown_one_goes_to_extra() -> None:
    raw = C1.replace(
        "Accept length:                           3.48\n",
        "Accept length: 3.48\nAccept length: 9.99\nDraft tokens: 3 per step\n",
    )
    r = parse_printed_block(block(raw))
    assert r.figures["accept_length"] == 3.48
    assert r.notes == ["'Accept length' printed twice; the first value is kept"]
    assert r.extra == {"draft_tokens": "3 per step"}
    assert r.figures["max_itl_ms"] == 29.5  # reading goes on after them


def test_values_as_sglang_prints_them() -> None:
    lines = {
        "Backend:": "sglang-oai",
        "Traffic request rate:": "Infinity",
        "Max request concurrency:": "none",
        "Peak concurrent requests:": "n/a",
        "Accept length:": "",
        "Concurrency:": "3",
    }
    raw = C1
    for label, value in lines.items():
        old = next(line for line in C1.splitlines() if line.startswith(label))
        raw = raw.replace(old, f"{label} {value}")
    r = parse_printed_block(block(raw))
    assert r.figures["backend"] == "sglang-oai" and r.figures["request_rate"] == "inf"
    assert r.figures["max_concurrency"] is None and r.figures["peak_concurrent_requests"] is None
    assert r.figures["accept_length"] is None
    assert r.figures["concurrency"] == 3.0 and isinstance(r.figures["concurrency"], float)


def test_goodput_slo_and_cache_sections() -> None:
    extra = (
        "SLOs (ms):                               ttft:200 tpot:20\n"
        "Request goodput (req/s):                 0.25\n"
        "TTFT SLO attainment (%):                 90.00%\n"
        "E2E SLO attainment (%):                  80.00%\n"
        "Device:                                  12\n"
        "-----------------Cache Hit Details----------------\n"
        "Device:                                  100\n"
        "Host:                                    20\n"
        "Storage (disk):                          3\n"
        "Cache hit rate:                          12.5%\n"
    )
    raw = C1.replace("----------------End-to-End Latency", extra + "----------------End-to-End Latency")
    r = parse_printed_block(block(raw))
    assert r.figures["goodput_slos"] == "ttft:200 tpot:20" and r.figures["request_goodput_req_s"] == 0.25
    assert r.figures["ttft_slo_attainment_pct"] == 90.0 and r.figures["e2el_slo_attainment_pct"] == 80.0
    assert r.figures["cache_device_tokens"] == 100 and r.figures["cache_host_tokens"] == 20
    assert r.figures["cache_storage_tokens"] == 3 and r.figures["cache_hit_rate_pct"] == 12.5
    assert r.extra == {"device": "12"}  # a 'Device:' line outside the cache section is not a cache figure
