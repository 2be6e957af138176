"""The sweep's pure parts: the levels, the client's module and arguments, each level's window; the CLI's checks."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuhost.bench_serving.sweep import SweepPlan, client_args, client_module, level_window, parse_concurrency

SRC = str(Path(__file__).resolve().parents[3] / "src")
LAUNCHED = {"profile": "p", "url": "http://10.0.0.5:30000", "model": "/srv/models/GLM-5-NVFP4", "served_model": "glm-5"}


def test_concurrency_is_sorted_and_checked():
    assert parse_concurrency("256, 1,64") == (1, 64, 256)
    for bad, why in (
        ("", "comma list"),
        ("1,,2", "comma list"),
        ("0,4", "'0' is not a positive integer"),
        ("1,x", "'x' is not"),
        ("-3", "not a positive"),
        ("4,4", "4 given twice"),
        ("1,100000", "more than"),
    ):
        with pytest.raises(ValueError, match=why):
            parse_concurrency(bad)


def test_client_module_follows_the_version():
    assert client_module("0.5.14") == "sglang.bench_serving"
    assert client_module("0.4.6.post1") == "sglang.bench_serving"
    assert client_module("0.5.15") == "sglang.benchmark.serving"
    assert client_module("0.5.23") == "sglang.benchmark.serving"
    assert client_module(None) == "sglang.benchmark.serving"


def test_client_args_are_the_fixed_offline_dataset_at_the_level():
    plan = SweepPlan((1, 64), input_len=128, output_len=32)
    args = client_args(plan, 64, LAUNCHED, None)
    pairs = dict(zip(args[::2], args[1::2], strict=False))
    assert args[-1] == "--disable-tqdm"
    assert pairs["--dataset-name"] == "random-ids" and pairs["--tokenizer"] == "/srv/models/GLM-5-NVFP4"
    assert pairs["--max-concurrency"] == "64" and pairs["--num-prompts"] == str(3 * 64)
    assert pairs["--random-input-len"] == "128" and pairs["--random-output-len"] == "32"
    assert pairs["--random-range-ratio"] == "1.0" and pairs["--model"] == "glm-5"
    assert pairs["--base-url"] == "http://10.0.0.5:30000" and "--output-file" not in args
    assert plan.prompts(1) == 8 and SweepPlan((1,), prompts_per_level=5).prompts(1024) == 5
    local = client_args(SweepPlan((1,), tokenizer="/tok"), 1, LAUNCHED, "/tmp/x/data.json")
    assert "sharegpt" in local and "/tmp/x/data.json" in local and "/tok" in local


def test_level_window_is_the_benchmark_run_at_the_end_of_the_client():
    assert level_window(100.0, 130.0, 20.0) == (110.0, 130.0)
    assert level_window(100.0, 130.0, None) == (100.0, 130.0)
    assert level_window(100.0, 130.0, 45.0) == (100.0, 130.0)  # longer than the client lived: not believed


@pytest.mark.parametrize(
    "bad", [SweepPlan(()), SweepPlan((1,), sample_interval_ms=1000), SweepPlan((1,), dataset="/no")]
)
def test_bad_plans_are_refused(bad):
    with pytest.raises(ValueError):
        bad.check()


def cli(*args, cwd=None):
    env = {**os.environ, "PYTHONPATH": SRC, "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "gpuhost", "bench", "sglang", *args], capture_output=True, text=True, env=env, cwd=cwd
    )


def test_cli_refuses_bad_levels_and_missing_input_with_2(tmp_path):
    inv = tmp_path / "inv.yml"
    inv.write_text("nodes: {}\n")
    r = cli("-i", str(inv), "--concurrency", "1,0")
    assert r.returncode == 2 and "'0' is not a positive integer" in r.stderr, r.stderr
    r = cli("-i", str(inv))
    assert r.returncode == 2 and "--concurrency" in r.stderr
    r = cli("--parse", str(inv), "--concurrency", "1")
    assert r.returncode == 2 and "--parse reads a file" in r.stderr
    bad = tmp_path / "base.json"
    bad.write_text('{"schema": "other"}')
    r = cli("-i", str(inv), "--concurrency", "1,2", "--baseline", str(bad))
    assert r.returncode == 2 and "not a gpuhost.bench-sglang/1 result document" in r.stderr, r.stderr
