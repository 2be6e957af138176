"""Round two of the log doctor on real captures (tests/fixtures/sglang/logs-round2, see SOURCE.md): the fatal
classes it missed, a cause and fix that fit the error embedded in the line, and warnings that are not fatal."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuhost.checks import Level
from gpuhost.cli.app import _register, app
from gpuhost.serve.logscan import scan_text
from gpuhost.serve.logscan.phases import Phase, PhaseTracker

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "sglang"
LOGS = FIX / "logs-round2"

# file → (signatures reported, fatal?)
EXPECTED = {
    "sglang-3892-ima-nccl-watchdog.log": ({"cuda-illegal-memory-access"}, True),
    "sglang-22987-ima-kimi-nvfp4-watchdog.log": ({"cuda-illegal-memory-access"}, True),
    "sglang-5491-ima-flashinfer-prefill-kernel.log": ({"cuda-illegal-memory-access", "scheduler-crashed"}, True),
    "sglang-5029-capture-ima-dsr1-h200.log": ({"cuda-illegal-memory-access", "graph-capture-failed"}, True),
    "sglang-748-capture-no-kernel-image-sm75.log": ({"no-kernel-image", "graph-capture-failed"}, True),
    "sglang-831-rmsnorm-no-kernel-image-v100.log": ({"no-kernel-image"}, True),
    "flashinfer-920-rmsnorm-no-kernel-image-trtllm.log": ({"no-kernel-image"}, True),
    "slime-1314-flashinfer-ninja-calledprocesserror-ray.log": (
        {"flashinfer-jit-build-failed", "scheduler-crashed"},
        True,
    ),
    "transformerlab-381-flashinfer-ninja-missing-pipe-logger.log": (
        {"flashinfer-jit-build-failed", "scheduler-crashed"},
        True,
    ),
    "sglang-4205-capture-gloo-connection-closed.log": ({"graph-capture-failed", "scheduler-crashed"}, True),
    "sglang-1953-nan-logits-after-startup-amd.log": ({"nan-in-sampling"}, False),
    "sglang-pr14369-nan-logits-tp8.log": ({"nan-in-sampling"}, False),
    "flashinfer-1892-jit-capture-gha-timestamps.log": ({"python-traceback"}, False),
    "sglang-167-fastchat-worker-no-zmq-pipe-logger.log": ({"python-module-missing"}, True),
    "flashinfer-1919-could-not-find-nvcc-vllm-worker.log": ({"flashinfer-jit-build-failed"}, True),
    "vllm-21960-flashinfer-nvcc-not-found.log": ({"flashinfer-jit-build-failed"}, True),
    # start-ups stuck in capture: no signature, not fatal (the readiness wait judges a hang: test_readiness_wait.py)
    "sglang-7324-capture-bar-only-stuck-after-jit.log": (set(), False),
    "sglang-12402-capture-bar-flashmla-stuck.log": (set(), False),
    # a start whose version prints no capture end line, up and ready: nothing to report
    "sglang-docs-nb-20241101-capture-begin-no-end-ready.log": (set(), False),
}

_register()


def _hit(name: str, signature: str):
    scanner = scan_text((LOGS / name).read_text())
    return next(h for h in scanner.report() if h.signature == signature)


def test_every_round2_capture_has_an_expectation_and_a_source():
    files = {p.name for p in LOGS.glob("*.log")}
    assert files == set(EXPECTED)
    sources = (LOGS / "SOURCE.md").read_text()
    for name in files:
        assert f"`{name}`" in sources


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_round2_capture(name: str):
    want, fatal = EXPECTED[name]
    scanner = scan_text((LOGS / name).read_text())
    assert {h.signature for h in scanner.report()} == want
    assert scanner.fatal is fatal


@pytest.mark.parametrize("name", ["sglang-3892-ima-nccl-watchdog.log", "sglang-22987-ima-kimi-nvfp4-watchdog.log"])
def test_illegal_access_relayed_by_the_nccl_watchdog_is_a_kernel_fault_not_nccl(name: str):
    hit = _hit(name, "cuda-illegal-memory-access")
    f = hit.finding
    assert f.level is Level.FAIL
    assert f.cause and "watchdog only relays it" in f.cause and "neither NCCL nor the network" in f.cause
    assert f.fix and "CUDA_LAUNCH_BLOCKING=1" in f.fix
    # the evidence is the message, shipper prefixes ([rank3]: and c10's [E226 ... ProcessGroupNCCL.cpp:1595]) off
    assert hit.evidence.startswith("[PG ID 2 PG GUID 3 Rank 3] Process group watchdog thread terminated")
    assert hit.lines[0][0] == 1


def test_illegal_access_in_a_flashinfer_kernel_points_at_the_attention_backend():
    f = _hit("sglang-5491-ima-flashinfer-prefill-kernel.log", "cuda-illegal-memory-access").finding
    assert f.cause and f.cause.startswith("a FlashInfer kernel")
    assert f.fix and "--attention-backend" in f.fix


def test_no_kernel_image_says_the_build_lacks_this_gpu_architecture():
    for name in ("sglang-831-rmsnorm-no-kernel-image-v100.log", "flashinfer-920-rmsnorm-no-kernel-image-trtllm.log"):
        f = _hit(name, "no-kernel-image").finding
        assert f.level is Level.FAIL
        assert f.cause and "compute capability" in f.cause
        assert f.fix and "compute_cap" in f.fix and "get_arch_list" in f.fix


def test_flashinfer_jit_fix_follows_what_failed():
    missing = _hit("transformerlab-381-flashinfer-ninja-missing-pipe-logger.log", "flashinfer-jit-build-failed")
    assert missing.finding.fix and missing.finding.fix.startswith("pip install ninja")
    assert missing.evidence == "FileNotFoundError: [Errno 2] No such file or directory: 'ninja'"
    failed = _hit("slime-1314-flashinfer-ninja-calledprocesserror-ray.log", "flashinfer-jit-build-failed")
    assert failed.finding.fix and "first 'error:' line" in failed.finding.fix
    # Ray's "[repeated 2x across cluster]" is not part of the message
    assert failed.evidence.endswith("returned non-zero exit status 1.")


@pytest.mark.parametrize(
    "name", ["flashinfer-1919-could-not-find-nvcc-vllm-worker.log", "vllm-21960-flashinfer-nvcc-not-found.log"]
)
def test_nvcc_missing_says_install_the_toolkit(name: str):
    hit = _hit(name, "flashinfer-jit-build-failed")
    assert hit.finding.level is Level.FAIL
    assert hit.finding.fix and hit.finding.fix.startswith("install the CUDA toolkit")
    assert "nvcc" in hit.evidence and "pid=" not in hit.evidence and "ERROR" not in hit.evidence  # prefixes off


# ---- the graph-capture finding dispatches on the embedded error


def test_capture_failed_on_a_closed_gloo_connection_does_not_advise_a_smaller_capture():
    f = _hit("sglang-4205-capture-gloo-connection-closed.log", "graph-capture-failed").finding
    assert f.cause and "gloo" in f.cause and "another rank or node died" in f.cause
    assert f.fix and "a smaller capture does not help" in f.fix
    assert "--cuda-graph-max-bs" not in f.fix


def test_capture_failed_on_missing_kernels_says_no_flag_helps():
    # SGLang's own message advises a smaller --mem-fraction-static; the cause is the build, not memory
    f = _hit("sglang-748-capture-no-kernel-image-sm75.log", "graph-capture-failed").finding
    assert f.cause and "no build for this GPU's compute capability" in f.cause
    assert f.fix and "does not help" in f.fix and "--cuda-graph-max-bs" not in f.fix


def test_capture_failed_on_an_illegal_access_advises_disabling_graphs_to_tell():
    f = _hit("sglang-5029-capture-ima-dsr1-h200.log", "graph-capture-failed").finding
    assert f.fix and f.fix.startswith("rerun with --disable-cuda-graph")


def test_capture_failed_out_of_memory_still_advises_a_smaller_capture():
    scanner = scan_text((FIX / "logs" / "sglang-5285-capture-oom.log").read_text())
    f = next(h for h in scanner.report() if h.signature == "graph-capture-failed").finding
    assert f.fix and "--cuda-graph-max-bs-decode" in f.fix


# ---- NaN: SGLang's check logs and replaces; PyTorch's RuntimeError kills the rank


@pytest.mark.parametrize("name", ["sglang-1953-nan-logits-after-startup-amd.log", "sglang-pr14369-nan-logits-tp8.log"])
def test_sglang_nan_detection_is_a_warning_and_does_not_blame_sm120_fp4(name: str):
    f = _hit(name, "nan-in-sampling").finding
    assert f.level is Level.WARN
    assert f.cause and "keeps serving" in f.cause
    assert "SM120" not in f.cause and "FP4" not in f.cause and "2708" not in f.cause


def test_nan_on_a_glm5_log_keeps_the_fp4_explanation():
    """Constructed from two real captures: the GLM-5 log's lines (zai-org/GLM-5#22) followed by the NaN lines of
    sglang PR #14369 (no public capture has both)."""
    text = (FIX / "logs" / "glm5-22-glm-moe-dsa-flattened.log").read_text() + (
        LOGS / "sglang-pr14369-nan-logits-tp8.log"
    ).read_text()
    f = next(h for h in scan_text(text).report() if h.signature == "nan-in-sampling").finding
    assert f.level is Level.WARN
    assert f.cause and "flashinfer#2708" in f.cause


def test_pytorch_nan_runtime_error_is_fatal_without_the_sm120_story():
    scanner = scan_text((FIX / "logs" / "internlm-459-nan-probability.log").read_text())
    f = next(h for h in scanner.report() if h.signature == "nan-in-sampling").finding
    assert f.level is Level.FAIL and scanner.fatal
    assert f.cause and "SM120" not in f.cause and "2708" not in f.cause


def test_doctor_exits_0_on_the_nan_warning_and_1_on_the_illegal_access():
    runner = CliRunner()
    ok = runner.invoke(app, ["doctor", "sglang-log", str(LOGS / "sglang-1953-nan-logits-after-startup-amd.log")])
    assert ok.exit_code == 0, ok.output
    assert ok.output.startswith("WARN sglang.log.nan-in-sampling")
    bad = runner.invoke(app, ["doctor", "sglang-log", "--json", str(LOGS / "sglang-3892-ima-nccl-watchdog.log")])
    assert bad.exit_code == 1
    import json

    doc = json.loads(bad.output)
    (finding,) = doc["findings"]
    assert finding["check"] == "sglang.log.cuda-illegal-memory-access"
    assert finding["evidence"].endswith("CUDA error: an illegal memory access was encountered")
    assert finding["lines"][0]["line"] == 1


def test_a_nan_warning_then_the_sampling_crash_is_fatal():
    """Constructed from two real captures: sglang#1953's NaN warning lines, then InternLM#459's RuntimeError."""
    text = (LOGS / "sglang-1953-nan-logits-after-startup-amd.log").read_text() + (
        FIX / "logs" / "internlm-459-nan-probability.log"
    ).read_text()
    scanner = scan_text(text)
    hit = next(h for h in scanner.report() if h.signature == "nan-in-sampling")
    assert scanner.fatal and hit.finding.level is Level.FAIL
    assert hit.evidence.startswith("RuntimeError: probability tensor contains")
    assert hit.lines[0][1].endswith("Detected errors during sampling! NaN in the logits.")  # both lines are kept


def test_a_missing_module_behind_fastchats_pipe_logger_names_the_module_and_its_package():
    # sglang#167: FastChat's sglang_worker imports SGLang, whose detokenizer imports zmq, which is not installed;
    # every line carries FastChat's "ts | ERROR | stderr | " and slurm reports exit code 1
    runner = CliRunner()
    r = runner.invoke(app, ["doctor", "sglang-log", str(LOGS / "sglang-167-fastchat-worker-no-zmq-pipe-logger.log")])
    assert r.exit_code == 1
    first = r.output.splitlines()[0]
    assert first == (
        "FAIL sglang.log.python-module-missing: A Python module the server imports is not installed: "
        "ModuleNotFoundError: No module named 'zmq'"
    )
    assert "pip install pyzmq" in r.output
    assert "Unclassified Python traceback" not in r.output  # the traceback is classified by its last line


def test_a_start_that_prints_capture_begin_but_no_end_line_and_serves_is_not_a_capture_hang():
    # sglang#1953 (SGLang of 2024-11): both TP ranks log "Capture cuda graph begin", no end line (that version
    # prints none), then Uvicorn runs and a prefill is served: the capture ended, the server is up
    path = LOGS / "sglang-1953-nan-logits-after-startup-amd.log"
    text = path.read_text()
    assert text.count("Capture cuda graph begin") == 2 and "Capture cuda graph end" not in text
    r = CliRunner().invoke(app, ["doctor", "sglang-log", str(path)])
    assert r.exit_code == 0, r.output
    assert "start-up reached: http up\n" in r.output
    assert "did not end" not in r.output
    phases = scan_text(text).phases
    assert not phases.capture_in_progress and phases.state.graph_captures_open == 0


def test_a_second_start_with_a_begin_line_and_no_end_line_is_ready_with_its_capture_counted():
    # SGLang's docs CI on 2024-11-01 (SOURCE.md; SGLang of that date prints no end line): Llama-3.1-8B on TP0 loads
    # its 4 shards, "Capture cuda graph begin" at 07:53:32, the KV pool (max_total_num_tokens=442913) at 07:53:41,
    # Uvicorn, a prefill, "fired up": the capture ended (the server serves), the start is complete
    path = LOGS / "sglang-docs-nb-20241101-capture-begin-no-end-ready.log"
    text = path.read_text()
    assert text.count("Capture cuda graph begin") == 1 and "Capture cuda graph end" not in text
    r = CliRunner().invoke(app, ["doctor", "sglang-log", str(path)])
    assert r.exit_code == 0, r.output
    assert r.output == "start-up reached: ready\nno known signature found\n"
    tracker = PhaseTracker()
    seen = [p for p in (tracker.feed(line) for line in text.splitlines()) if p is not None]
    assert list(dict.fromkeys(seen)) == [
        Phase.LOADING_WEIGHTS,
        Phase.WEIGHTS_LOADED,
        Phase.KV_ALLOCATED,  # "Memory pool end."
        Phase.GRAPH_CAPTURE,
        Phase.HTTP_UP,  # no GRAPH_CAPTURED line in between
        Phase.READY,
    ]
    st = scan_text(text).phases.state
    assert st.phase is Phase.READY and st.graph_captures_open == 0 and st.graph_captures_done == 1
    assert (st.kv_tokens, st.url, st.ready_lines) == (442913, "http://0.0.0.0:30000", 1)
