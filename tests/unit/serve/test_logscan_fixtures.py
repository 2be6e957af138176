"""The engine on real log excerpts from public issue threads (tests/fixtures/sglang/logs, see SOURCE.md)."""

from pathlib import Path

import pytest

from gpuhost.serve.logscan import LogScanner, Phase, scan_text

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "sglang" / "logs"

# file → (signatures that must be reported, fatal?)
EXPECTED = {
    "sglang-19408-glm-moe-dsa-keyerror.log": ({"transformers-model-type"}, True),
    "glm5-22-glm-moe-dsa-flattened.log": ({"transformers-model-type"}, True),
    "sglang-15650-allreduce-fusion-sm120.log": ({"arch-unsupported-kernel", "graph-capture-failed"}, True),
    "sglang-13342-capture-no-supported-arch.log": ({"arch-unsupported-kernel", "graph-capture-failed"}, True),
    "sglang-5285-capture-oom.log": ({"cuda-oom", "graph-capture-failed", "scheduler-crashed"}, True),
    "sglang-1751-capture-begin-traceback.log": ({"python-traceback"}, False),
    "sglang-1693-nccl-watchdog-timeout.log": ({"nccl-timeout"}, True),
    "sglang-10216-nccl-collective-timeout-dump.log": ({"nccl-timeout"}, True),
    "sglang-12818-unrecognized-args.log": ({"bad-arguments"}, True),
    "sglang-34226-unrecognized-served-model-name.log": ({"bad-arguments"}, True),
    "sglang-2468-warmup-failed.log": ({"warmup-failed"}, True),
    "sglang-19712-dsv32-running.log": (set(), False),
    "sglang-938-decode-queue.log": (set(), False),
    "sglang-4489-scheduler-traceback.log": ({"scheduler-crashed"}, True),
    "sglang-4205-init-cuda-graphs-traceback.log": ({"scheduler-crashed"}, True),
    "sglang-21460-sampler-traceback-truncated.log": ({"python-traceback"}, False),
    "internlm-459-nan-probability.log": ({"nan-in-sampling"}, True),
    "openui-226-uvicorn-port-in-use.log": ({"port-in-use"}, True),
    "gpustack-5842-sglang-metrics-port-in-use.log": ({"port-in-use"}, True),
    "nvidia-docker-139-uvm-missing.log": ({"nvidia-uvm-missing"}, True),
    "atorch-2-driver-803-in-container.log": ({"driver-mismatch"}, True),
}


def test_every_fixture_has_an_expectation_and_a_source():
    files = {p.name for p in LOGS.glob("*.log")}
    assert files == set(EXPECTED)
    assert len(files) >= 15
    sources = (LOGS / "SOURCE.md").read_text()
    for name in files:
        assert f"`{name}`" in sources


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture(name: str):
    want, fatal = EXPECTED[name]
    scanner = scan_text((LOGS / name).read_text())
    got = {h.signature for h in scanner.report()}
    assert got == want, got
    assert scanner.fatal is fatal


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_incremental_feed_finds_the_same(name: str):
    text = (LOGS / name).read_text()
    whole = {h.signature for h in scan_text(text).hits}
    scanner = LogScanner()
    for i in range(0, len(text), 7):  # arbitrary pipe-sized pieces
        scanner.feed_chunk(text[i : i + 7])
    scanner.close()
    assert {h.signature for h in scanner.hits} == whole


def test_matching_lines_are_kept_with_their_numbers():
    scanner = scan_text((LOGS / "sglang-5285-capture-oom.log").read_text())
    oom = next(h for h in scanner.hits if h.signature == "cuda-oom")
    assert oom.lines[0][0] == 18 and "Capture cuda graph failed: CUDA out of memory" in oom.lines[0][1]
    assert oom.finding.cause and oom.finding.cause.startswith("during CUDA graph capture")


def test_phases_from_real_startup_logs():
    s = scan_text((LOGS / "sglang-2468-warmup-failed.log").read_text()).phases
    assert s.state.phase is Phase.HTTP_UP and s.state.graph_captures_done == 1 and not s.capture_in_progress
    assert s.state.url == "http://0.0.0.0:30000"
    s = scan_text((LOGS / "sglang-1751-capture-begin-traceback.log").read_text()).phases
    assert s.state.phase is Phase.GRAPH_CAPTURE and s.capture_in_progress
