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

from tests.integration.lab.test_launch_sglang import API_KEY, CONTROL, ct, gpuhost, launch_lab  # noqa: F401
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
    # a missing baseline is a failure of this test too, not a skip: the regression was not shown
    assert baseline.exists(), "the first sweep wrote no baseline.json (see the test above)"
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


QUICK = ["--input-len", "8", "--output-len", "16", "--warmup-requests", "1", "--sample-interval-ms", "250"]


class QueueWatch:
    """The server's own waiting queue (``sglang:num_queue_reqs`` on its /metrics) polled while a bench runs."""

    def __init__(self, lab: LabHandle) -> None:
        import threading

        self.lab, self.most, self.polls, self.queued_polls = lab, 0.0, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        url = f"http://{self.lab.node('sgl').address}:30000/metrics"
        while not self._stop.is_set():
            out = ct(self.lab, f"curl -s {url} | grep '^sglang:num_queue_reqs'", timeout=30).stdout.split()
            if out:
                self.most, self.polls = max(self.most, float(out[-1])), self.polls + 1
                self.queued_polls += float(out[-1]) > 0
            self._stop.wait(0.2)

    def __enter__(self) -> QueueWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


def _level(doc: dict, concurrency: int) -> dict:
    (lv,) = [lv for lv in doc["levels"] if lv["concurrency"] == concurrency]
    return lv


def test_levels_above_the_servers_running_bound_are_reported_as_queueing(launched: LabHandle, tmp_path: Path) -> None:
    # lab-glm5-tp2 sets no --max-running-requests: the stand-in runs 64 at once, as its start-up log says
    # 40 ms a token: a request takes about 0.7 s, so the 256 level (768 requests through 64 slots, 12 waves) lasts
    # several seconds, long enough for the watch (one pct exec and curl a poll, about a second on a busy machine)
    # to see the queue; at the default 4 ms the whole level is over in about a second and can fall between polls
    ct(launched, f"echo 40 > {CONTROL}/itl_ms")
    out = tmp_path / "runs"
    try:
        with QueueWatch(launched) as queue:
            r = gpuhost(launched, "bench", "sglang", "--concurrency", "64,256", *QUICK, "--out", str(out), timeout=600)
    finally:
        ct(launched, f"rm -f {CONTROL}/itl_ms")
    assert r.returncode == 0, r.stdout + r.stderr
    assert queue.queued_polls >= 2 and queue.most > 0, (queue.polls, queue.most)  # the server held requests back
    doc = json.loads((run_dir_of(out) / "result.json").read_text())
    warned = [f for f in doc["findings"] if f["check"] == "bench.admission-bound"]
    assert [f["level"] for f in warned] == ["WARN"], warned
    assert "c256: 256 concurrent requests against a server that runs at most 64: 192 of them queue" in r.stdout


def _shipped_at_tp2() -> dict:
    """The shipped glm5-nvfp4-tp8-sm120, as it ships, on the lab's 2 GPUs (only gpus and tp_size changed)."""
    from importlib import resources

    from ruamel.yaml import YAML

    text = (resources.files("gpuhost.serve") / "profiles" / "glm5-nvfp4-sm120-sglang-0.5.23.yml").read_text()
    (shipped,) = [p for p in YAML(typ="safe", pure=True).load(text)["profiles"] if p["name"] == "glm5-nvfp4-tp8-sm120"]
    return {**shipped, "name": "lab-shipped-tp2", "gpus": 2, "tp_size": 2}


def test_shipped_profile_launch_names_its_bounds_and_a_sweep_to_1024_never_only_queues(
    launched: LabHandle, tmp_path: Path
) -> None:
    import os
    import subprocess
    import sys

    from ruamel.yaml import YAML

    from tests.lab_fixtures import SRC

    yaml = YAML(typ="safe", pure=True)
    extra = launched.state_dir / "shipped.yml"
    with extra.open("w") as fh:
        yaml.dump({"profiles": [_shipped_at_tp2()]}, fh)
    inv = launched.state_dir / "launch.yml"
    doc = yaml.load(inv.read_text())
    doc["vars"]["sglang_profile_dirs"] = [*doc["vars"]["sglang_profile_dirs"], str(extra)]
    with inv.open("w") as fh:
        yaml.dump(doc, fh)
    state, log = tmp_path / "state", tmp_path / "launch.log"
    env = {**os.environ, "PYTHONPATH": SRC, "COLUMNS": "200", "NO_COLOR": "1", "XDG_STATE_HOME": str(state)}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gpuhost", *args, "-i", str(inv)],
            capture_output=True,
            text=True,
            timeout=900,
            env=env,
        )

    r = cli("launch", "sglang", "--profile", "lab-shipped-tp2", "--allow-restart", "--log", str(log))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "server running profile lab-shipped-tp2: admits 1024 running requests, decode graphs up to batch 256" in (
        r.stdout
    )
    out = tmp_path / "runs"
    with QueueWatch(launched) as queue:
        b = cli("bench", "sglang", "--concurrency", "1,64,256,1024", *QUICK, "--out", str(out))
    assert b.returncode == 0, b.stdout + b.stderr
    assert queue.polls >= 3 and queue.most == 0, (queue.polls, queue.most)  # no request ever waited for a slot
    run = run_dir_of(out)
    result = json.loads((run / "result.json").read_text())
    admission = [f for f in result["findings"] if f["check"] == "bench.admission-bound"]
    assert [f["level"] for f in admission] == ["PASS"], admission
    for c in (1, 64, 256, 1024):
        lv = _level(result, c)
        assert lv["status"] == "ok" and lv["figures"]["successful_requests"] == max(8, 3 * c), lv
    # the planted key (the serve entry's api_key_file): echoed by the server in every JSONL line, kept nowhere
    raw = (run / "c64.jsonl").read_text()
    assert '"api_key": "********"' in raw and "--api-key ********" in raw
    files = [p for base in (run, state) if base.exists() for p in base.rglob("*") if p.is_file()] + [log]
    assert log.stat().st_size > 0 and len(files) > 5
    holding = [str(p) for p in files if API_KEY.encode() in p.read_bytes()]
    assert holding == [], holding
    assert API_KEY not in r.stdout + r.stderr + b.stdout + b.stderr
    gpuhost(launched, "launch", "sglang", "--allow-restart")  # back to the module's own profile
