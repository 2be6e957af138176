"""The JSONL mapping, with every expected name and value written here by hand, not taken from the parser's tables.

1. The first line of the real capture ``v04-llama70b-h200-online.jsonl`` (SOURCE.md: datacrunch-research/
   h200-benchmarks), read by a person: ``completed`` is the successful requests, ``duration`` the benchmark
   duration in seconds, ``output_throughput`` the output tokens per second.
2. A line of the 0.5.15-0.5.23 writer (the key list of shared reference sglang-2026-12.md section 3.3,
   ``sglang.bench_serving`` ``benchmark()``'s ``result`` dict), every figure given a different value, so that a key
   mapped to a wrong name, or to itself, shows.
"""

from __future__ import annotations

import json

from gpuhost.bench_serving.parse import parse_jsonl_record, parse_level, parse_output
from tests.unit.bench_serving.corpus import text


def test_first_line_of_the_real_capture_by_hand() -> None:
    r = parse_output(text("v04-llama70b-h200-online.jsonl"))[0]
    assert r.source == "jsonl" and r.status == "ok"
    assert r.figures == {
        "backend": "sglang",
        "dataset_name": "random",
        "request_rate": 1.0,
        "max_concurrency": None,
        "total_input_tokens": 152612,
        "total_output_tokens": 160347,
        "total_output_tokens_retokenized": 160192,
        "mean_e2e_latency_ms": 7840.616212638561,
        "median_e2e_latency_ms": 7819.046192569658,
        "median_ttft_ms": 85.74514742940664,
        "median_itl_ms": 13.638956006616354,
        "output_throughput_tok_s": 537.4142851849319,
        "sharegpt_output_len": None,
        "random_input_len": 1024,
        "random_output_len": 1024,
        "random_range_ratio": 0.0,
        "duration_s": 298.3675805060193,
        "successful_requests": 300,
    }
    assert r.extra == {} and r.server_info is None


# the 0.5.23 writer's keys in its order; the values are chosen for this test (each one different)
LINE_0523 = {
    "tag": "c16",
    "backend": "sglang-oai",
    "dataset_name": "random",
    "request_rate": float("inf"),
    "max_concurrency": 16,
    "sharegpt_output_len": None,
    "random_input_len": 32,
    "random_output_len": 192,
    "random_range_ratio": 1.0,
    "server_info": {"tp_size": 2, "api_key": "sk-not-for-the-report"},
    "duration": 12.5,
    "completed": 48,
    "total_input_tokens": 1536,
    "total_input_text_tokens": 1535,
    "total_input_vision_tokens": 1,
    "total_output_tokens": 9216,
    "total_output_tokens_retokenized": 9215,
    "request_throughput": 3.84,
    "input_throughput": 122.88,
    "output_throughput": 737.28,
    "total_throughput": 860.16,
    "mean_e2e_latency_ms": 4001.0,
    "median_e2e_latency_ms": 4002.0,
    "std_e2e_latency_ms": 4003.0,
    "p90_e2e_latency_ms": 4004.0,
    "p95_e2e_latency_ms": 4005.0,
    "p99_e2e_latency_ms": 4006.0,
    "mean_ttft_ms": 101.0,
    "median_ttft_ms": 102.0,
    "std_ttft_ms": 103.0,
    "p90_ttft_ms": 104.0,
    "p95_ttft_ms": 105.0,
    "p99_ttft_ms": 106.0,
    "mean_tpot_ms": 21.0,
    "median_tpot_ms": 22.0,
    "std_tpot_ms": 23.0,
    "p90_tpot_ms": 24.0,
    "p95_tpot_ms": 25.0,
    "p99_tpot_ms": 26.0,
    "mean_itl_ms": 31.0,
    "median_itl_ms": 32.0,
    "std_itl_ms": 33.0,
    "p95_itl_ms": 35.0,
    "p99_itl_ms": 36.0,
    "p90_itl_ms": 34.0,
    "concurrency": 15.7,
    "accept_length": 2.5,
    "max_output_tokens_per_s": 1024.0,
    "max_concurrent_requests": 17,
}


def test_every_0523_key_lands_under_its_stable_name() -> None:
    r = parse_output(json.dumps(LINE_0523) + "\n")[0]
    assert r.source == "jsonl" and r.status == "ok"
    assert r.figures == {
        "tag": "c16",
        "backend": "sglang-oai",
        "dataset_name": "random",
        "request_rate": "inf",
        "max_concurrency": 16,
        "sharegpt_output_len": None,
        "random_input_len": 32,
        "random_output_len": 192,
        "random_range_ratio": 1.0,
        "duration_s": 12.5,
        "successful_requests": 48,
        "total_input_tokens": 1536,
        "total_input_text_tokens": 1535,
        "total_input_vision_tokens": 1,
        "total_output_tokens": 9216,
        "total_output_tokens_retokenized": 9215,
        "request_throughput_req_s": 3.84,
        "input_throughput_tok_s": 122.88,
        "output_throughput_tok_s": 737.28,
        "total_throughput_tok_s": 860.16,
        "mean_e2e_latency_ms": 4001.0,
        "median_e2e_latency_ms": 4002.0,
        "std_e2e_latency_ms": 4003.0,
        "p90_e2e_latency_ms": 4004.0,
        "p95_e2e_latency_ms": 4005.0,
        "p99_e2e_latency_ms": 4006.0,
        "mean_ttft_ms": 101.0,
        "median_ttft_ms": 102.0,
        "std_ttft_ms": 103.0,
        "p90_ttft_ms": 104.0,
        "p95_ttft_ms": 105.0,
        "p99_ttft_ms": 106.0,
        "mean_tpot_ms": 21.0,
        "median_tpot_ms": 22.0,
        "std_tpot_ms": 23.0,
        "p90_tpot_ms": 24.0,
        "p95_tpot_ms": 25.0,
        "p99_tpot_ms": 26.0,
        "mean_itl_ms": 31.0,
        "median_itl_ms": 32.0,
        "std_itl_ms": 33.0,
        "p90_itl_ms": 34.0,
        "p95_itl_ms": 35.0,
        "p99_itl_ms": 36.0,
        "concurrency": 15.7,
        "accept_length": 2.5,
        "peak_output_throughput_tok_s": 1024.0,
        "peak_concurrent_requests": 17,
    }
    assert r.server_info == {"tp_size": 2, "api_key": "********"}
    assert "sk-not-for-the-report" not in json.dumps(r.to_json())


def test_goodput_and_details_keys() -> None:
    line = {
        "backend": "sglang",
        "completed": 10,
        "duration": 2.0,
        "output_throughput": 50.0,
        "request_goodput": 4.5,
        "goodput_slos_ms": {"ttft": 200},
        "errors": ["", "timeout", ""],
        "ttfts": [0.1, 0.2, 0.3],
    }
    r = parse_jsonl_record(line)
    assert r.figures == {
        "backend": "sglang",
        "successful_requests": 10,
        "duration_s": 2.0,
        "output_throughput_tok_s": 50.0,
        "request_goodput_req_s": 4.5,
    }
    assert r.extra == {"goodput_slos_ms": {"ttft": 200}, "errors_count": 3, "error_count": 1, "ttfts_count": 3}


def test_a_line_without_core_figures_is_partial_and_zero_completed_is_failed() -> None:
    partial = parse_jsonl_record({"backend": "sglang", "completed": 3})
    assert partial.status == "partial" and partial.notes == [
        "missing core figures: duration_s, output_throughput_tok_s"
    ]
    failed = parse_jsonl_record({"backend": "sglang", "completed": 0, "duration": 1.0, "output_throughput": 0.0})
    assert failed.status == "failed" and failed.notes == ["no request succeeded"]


def test_a_result_as_json_has_the_schema_keys() -> None:
    r = parse_jsonl_record({"backend": "sglang", "completed": 2, "duration": 1.5, "output_throughput": 9.0, "foo": 1})
    assert r.to_json() == {
        "source": "jsonl",
        "status": "ok",
        "figures": {"backend": "sglang", "successful_requests": 2, "duration_s": 1.5, "output_throughput_tok_s": 9.0},
        "extra": {"foo": 1},
        "notes": [],
        "server_info": None,
    }


# ---- one sweep level: the printed output and the JSONL line it appended

PRINTED_C1 = text("v05-glm5-fp8-c1-mtp.txt")  # a real printed block: 117.96 output tok/s, c1


def test_a_level_without_its_jsonl_line_failed_whatever_it_printed() -> None:
    for jsonl in (None, "", "not json\n"):
        r = parse_level(PRINTED_C1 + "\nError running benchmark for request rate: inf\n", jsonl)
        assert (r.source, r.status) == ("log", "failed")
        assert r.notes == ["no JSONL result line was written", "Error running benchmark for request rate: inf"]
        assert r.figures["output_throughput_tok_s"] == 117.96  # what it printed is kept for the report
    bare = parse_level("", None)
    assert (bare.source, bare.status, bare.figures, bare.notes) == (
        "log",
        "failed",
        {},
        ["no JSONL result line was written"],
    )


def test_only_five_failure_lines_are_kept() -> None:
    lines = "".join(f"Error running benchmark for request rate: {i}\n" for i in range(7))
    r = parse_level(lines, None)
    assert len(r.notes) == 6 and r.notes[-1] == "Error running benchmark for request rate: 4"


def test_the_jsonl_line_is_the_record_and_the_printed_block_fills_in() -> None:
    line = json.dumps({"backend": "sglang", "completed": 8, "duration": 2.0, "output_throughput": 120.5})
    r = parse_level(PRINTED_C1, line + "\n")
    assert (r.source, r.status, r.notes) == ("jsonl", "ok", [])
    assert r.figures["output_throughput_tok_s"] == 120.5  # the line's, not the printed 117.96
    assert r.figures["accept_length"] == parse_output(PRINTED_C1)[0].figures["accept_length"]  # only printed


def test_two_jsonl_lines_the_last_is_used_and_it_says_so() -> None:
    one = json.dumps({"backend": "sglang", "completed": 8, "duration": 2.0, "output_throughput": 1.0})
    two = json.dumps({"backend": "sglang", "completed": 9, "duration": 3.0, "output_throughput": 2.0})
    r = parse_level("", one + "\n" + two + "\n")
    assert r.figures["successful_requests"] == 9 and r.notes == ["2 JSONL lines; the last is used"]


def test_secret_values_in_server_info_are_masked_but_empty_and_false_ones_are_kept() -> None:
    r = parse_jsonl_record(
        {
            "backend": "sglang",
            "completed": 1,
            "duration": 1.0,
            "output_throughput": 1.0,
            "server_info": {"api_key": "", "hf_token": None, "admin_api_key": False, "ssl_keyfile_password": "pw"},
        }
    )
    assert r.server_info == {
        "api_key": "",
        "hf_token": None,
        "admin_api_key": False,
        "ssl_keyfile_password": "********",
    }


def test_output_details_are_counted_and_server_info_kept_apart() -> None:
    line = {
        "backend": "sglang",
        "completed": 3,
        "duration": 1.0,
        "output_throughput": 3.0,
        "server_info": {"tp_size": 8},
        "input_lens": [32, 32, 32],
        "output_lens": [8, 8],
        "ttfts": [0.1],
        "itls": [[0.01], [0.02], [0.03], [0.04]],
        "generated_texts": ["a", "b", "c", "d", "e"],
        "errors": ["", "", "x", "y", "", ""],
    }
    r = parse_jsonl_record(line)
    assert r.extra == {
        "input_lens_count": 3,
        "output_lens_count": 2,
        "ttfts_count": 1,
        "itls_count": 4,
        "generated_texts_count": 5,
        "errors_count": 6,
        "error_count": 2,
    }
    assert r.server_info == {"tp_size": 8} and "server_info" not in r.figures


def test_two_printed_blocks_and_a_markdown_fence() -> None:
    from gpuhost.bench_serving.parse import split_printed_blocks

    c1 = text("v05-glm5-fp8-c1-mtp.txt")
    two = split_printed_blocks(c1 + "some log line\n" + c1)
    assert [len(b) for b in two] == [len(c1.splitlines())] * 2
    fenced = split_printed_blocks("```\n" + c1.rsplit("=" * 50, 1)[0] + "```\nafter the paste\n")
    assert fenced[0][-1].startswith("Max ITL (ms):") and "after the paste" not in fenced[0]


def test_a_failure_log_is_a_failed_result_after_the_printed_ones() -> None:
    c1 = text("v05-glm5-fp8-c1-mtp.txt")
    results = parse_output(c1 + "Error running benchmark for request rate: 8\n")
    assert [(r.source, r.status) for r in results] == [("printed", "ok"), ("log", "failed")]
    assert results[1].notes == ["Error running benchmark for request rate: 8"]
    jsonl = json.dumps({"backend": "sglang", "completed": 1, "duration": 1.0, "output_throughput": 1.0})
    with_line = parse_output(jsonl + "\nError running benchmark for request rate: 8\n")
    assert [(r.source, r.status) for r in with_line] == [("jsonl", "ok")]  # the JSONL line is the record
    only = parse_output("Warmup failed - Please make sure benchmark arguments are correctly specified.\n")
    assert [(r.source, r.status) for r in only] == [("log", "failed")]


def test_lines_that_are_not_results_are_not_read_as_jsonl() -> None:
    other = '{"tick": 1}\n{"backend": "sglang"}\n{broken\n[1, 2]\n'
    ok = json.dumps({"backend": "sglang", "completed": 2, "duration": 1.0, "output_throughput": 1.0})
    assert [r.figures["successful_requests"] for r in parse_output(other + "  " + ok + "\n")] == [2]
    counted = json.dumps({"backend": "sglang", "output_throughput": 1.0})
    assert [r.status for r in parse_output(counted + "\n")] == ["partial"]
