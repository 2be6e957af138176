"""``gpuhost bench sglang`` sweeping a launched server in a lab container: SGLang's own client per level, the GPUs
sampled meanwhile on the target, the table, the plot and the JSON kept in a run directory; then the same sweep
against a server made slower (the stand-in's decode time per token tripled) flags the regression.

The lab is the launch test's (one node, 2 simulated GPUs, CT 230); the lab's nvidia-smi draws power from the
stand-in's requests in flight, so the watts must climb with the concurrency.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.lab.test_launch_sglang import CONTROL, ct, gpuhost, launch_lab  # noqa: F401
from tests.lab_fixtures import LabHandle

LEVELS = (1, 4, 16)
SWEEP = ["--concurrency", "16,1,4", "--input-len", "32", "--output-len", "192", "--sample-interval-ms", "250"]


@pytest.fixture(scope="module")
def launched(launch_lab: LabHandle) -> Iterator[LabHandle]:  # noqa: F811
    r = gpuhost(launch_lab, "launch", "sglang")
    assert r.returncode == 0, r.stdout + r.stderr
    ct(launch_lab, f"rm -f {CONTROL}/itl_ms")  # the default decode speed, 4 ms a token
    yield launch_lab
    ct(launch_lab, f"rm -f {CONTROL}/itl_ms")


def run_dir_of(out: Path) -> Path:
    dirs = sorted(p for p in out.iterdir() if p.is_dir())
    assert len(dirs) == 1, dirs
    return dirs[0]


def test_sweep_keeps_table_plot_json_and_power_per_gpu_per_level(launched: LabHandle, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    r = gpuhost(launched, "bench", "sglang", *SWEEP, "--out", str(out), timeout=600)
    text = r.stdout + r.stderr
    assert r.returncode == 0, text
    run = run_dir_of(out)
    assert run.name.endswith("-sgl-ct230")
    for name in ("result.json", "table.txt", "sweep.png", "samples.jsonl", *(f"c{c}.log" for c in LEVELS)):
        assert (run / name).stat().st_size > 0, name
    assert all((run / f"c{c}.jsonl").read_text().strip() for c in LEVELS)
    assert (run / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc = json.loads((run / "result.json").read_text())
    assert doc["schema"] == "gpuhost.bench-sglang/1" and doc["target"] == "sgl/CT 230"
    assert doc["plan"]["client"] == "sglang.benchmark.serving" and doc["plan"]["concurrency"] == list(LEVELS)
    assert doc["sampler"]["backend"] == "nvidia-smi" and doc["sampler"]["end_reason"] == "signal"
    assert [lv["concurrency"] for lv in doc["levels"]] == list(LEVELS)
    watts: dict[int, list[float]] = {0: [], 1: []}
    for lv in doc["levels"]:
        assert lv["status"] == "ok" and lv["figures"]["max_concurrency"] == lv["concurrency"]
        assert lv["figures"]["successful_requests"] == max(8, 3 * lv["concurrency"])
        assert lv["client_started"] < lv["start_wall"] < lv["end_wall"] <= lv["client_ended"]
        assert [g["index"] for g in lv["gpus"]] == [0, 1]
        for g in lv["gpus"]:
            assert g["samples"] >= 4  # 2 Hz or more over each level's window
            assert g["power_limit_w"] and g["power_mean_w"] < g["power_limit_w"]
            watts[g["index"]].append(g["power_mean_w"])
    for gpu, series in watts.items():
        assert series[0] < series[1] < series[2], (gpu, series)  # the watts climb with the concurrency
    throughput = [lv["figures"]["output_throughput_tok_s"] for lv in doc["levels"]]
    assert throughput[0] < throughput[1] < throughput[2], throughput
    table = (run / "table.txt").read_text()
    assert table in r.stdout and "c16" in table and "GPU1:" in table
    # the sampler is gone and left nothing behind on the target
    assert ct(launched, "ls -d /tmp/gpuhost-tool.* 2>/dev/null; pgrep -f '[g]pu_sampler[.]py'").stdout.strip() == ""
    (tmp_path.parent / "baseline.json").write_text((run / "result.json").read_text())


def test_a_slower_server_against_the_baseline_is_a_regression(launched: LabHandle, tmp_path: Path) -> None:
    baseline = tmp_path.parent / "baseline.json"
    if not baseline.exists():
        pytest.skip("needs the first sweep's result")
    ct(launched, f"echo 12 > {CONTROL}/itl_ms")  # injected: every token takes three times as long
    try:
        out = tmp_path / "runs"
        r = gpuhost(launched, "bench", "sglang", *SWEEP, "--out", str(out), "--baseline", str(baseline), timeout=600)
    finally:
        ct(launched, f"rm -f {CONTROL}/itl_ms")
    text = r.stdout + r.stderr
    assert r.returncode == 1, text
    assert "regression" in r.stdout and "output_throughput_tok_s" in r.stdout and "median_tpot_ms" in r.stdout
    doc = json.loads((run_dir_of(out) / "result.json").read_text())
    assert doc["comparison"]["verdict"] == "regression" and doc["verdict"] == "FAIL"
    regressed = {(c["level"], c["figure"]) for c in doc["comparison"]["regressions"]}
    for c in LEVELS:
        assert (f"c{c}", "output_throughput_tok_s") in regressed
    assert any(f["check"] == "bench.regression" and f["level"] == "FAIL" for f in doc["findings"])
