"""A level's raw JSONL and log without the server's key, and the levels that only measure SGLang's queue.

The ``server_info`` objects are built here from the fields SGLang 0.5.23 writes into each JSONL line (no public
capture holds one, see tests/fixtures/sglang/bench/SOURCE.md): ``api_key`` and ``launch_command`` (the argv alone,
``server_args.py:303-305``), ``max_running_requests`` and ``internal_states[].effective_max_running_requests_per_dp``
(``managers/scheduler_components/internal_state.py:73``).
"""

from __future__ import annotations

import json

from gpuhost.bench_serving.findings import ADMISSION, check_admission
from gpuhost.bench_serving.parse import parse_output
from gpuhost.bench_serving.results import LevelRun, summarise
from gpuhost.bench_serving.scrub import scrub_level
from gpuhost.redact import forget_all, redact

KEY = "sk-planted-4e1f9a77c0"


def _line(concurrency: int, bound: int | None, effective: int | None = None) -> str:
    info: dict[str, object] = {
        "api_key": KEY,
        "admin_api_key": None,
        "tokenizer_path": "nvidia/GLM-5-NVFP4",
        "max_running_requests": bound,
        "launch_command": f"sglang serve --model-path nvidia/GLM-5-NVFP4 --tp-size 8 --api-key {KEY} --port 30000",
        "internal_states": [{"effective_max_running_requests_per_dp": effective, "last_gen_throughput": 0.0}],
    }
    return json.dumps(
        {
            "backend": "sglang",
            "max_concurrency": concurrency,
            "server_info": info,
            "duration": 2.0,
            "completed": 3 * concurrency,
            "output_throughput": 100.0,
            "median_ttft_ms": 10.0,
            "median_tpot_ms": 4.0,
            "median_itl_ms": 4.0,
            "median_e2e_latency_ms": 100.0,
            "total_throughput": 120.0,
            "request_throughput": 1.0,
        }
    )


def test_scrubbed_level_holds_the_key_nowhere_and_later_messages_mask_it() -> None:
    forget_all()
    log = f"Warmup completed.\nserver_info: {{'api_key': '{KEY}'}}\n"
    jsonl, text = scrub_level(_line(64, 1024) + "\n", log)
    assert jsonl is not None and KEY not in jsonl and KEY not in text
    info = json.loads(jsonl)["server_info"]
    assert info["api_key"] == "********" and "--api-key ******** --port 30000" in info["launch_command"]
    assert info["tokenizer_path"] == "nvidia/GLM-5-NVFP4"  # not a secret, kept
    assert redact(f"error with {KEY}") == "error with ********"  # registered for every later message
    forget_all()


def _summaries(*lines: tuple[int, str]) -> list:
    return summarise([LevelRun(c, parse_output(text)[0]) for c, text in lines], None)


def test_levels_above_the_running_bound_are_called_queueing() -> None:
    found = check_admission(_summaries((64, _line(64, 64)), (256, _line(256, 64))))
    assert [(f.level.word, f.check) for f in found] == [("WARN", ADMISSION)]
    assert "c256: 256 concurrent requests against a server that runs at most 64: 192 of them queue" in found[0].message


def test_the_schedulers_effective_bound_wins_over_the_argument() -> None:
    found = check_admission(_summaries((512, _line(512, 1024, effective=300))))
    assert found[0].level.word == "WARN" and "runs at most 300" in found[0].message


def test_a_sweep_within_the_bound_passes() -> None:
    found = check_admission(_summaries(*((c, _line(c, 1024)) for c in (1, 64, 256, 1024))))
    assert [f.level.word for f in found] == ["PASS"] and "(1024)" in found[0].message
