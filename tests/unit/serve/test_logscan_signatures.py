"""One literal line per signature (short lines written for the test, not captures), plus the line handling."""

import pytest

from gpuhost.checks import Level, registered
from gpuhost.serve.logscan import SIGNATURES, LogScanner, Phase, PhaseTracker
from gpuhost.serve.logscan.normalize import message

LINES = {
    "bad-arguments": "sglang serve: error: ambiguous option: --pp could match --pp-size, --pp-max-micro-batch-size",
    "transformers-model-type": "KeyError: 'glm_moe_dsa'",
    "nan-in-sampling": "RuntimeError: probability tensor contains either `inf`, `nan` or element < 0",
    "cuda-oom": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    "kv-pool-too-small": "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
    "arch-unsupported-kernel": "RuntimeError: FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs.",
    "dsa-backend-refused": "ValueError: GLM DSA with FP8 KV cache on NVIDIA SM120/SM121 supports only "
    "flashinfer_sparse_mla (default) or triton_sparse_mla (prefill), but got ['trtllm']",
    "shared-experts-mismatch": "RuntimeError: The size of tensor a (3072) must match the size of tensor b (6144) "
    "at non-singleton dimension 0",
    "nccl-timeout": "[rank0]:[E1016 03:31:38.9 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE)",
    "dist-init-timeout": "torch.distributed.DistStoreError: Timed out after 3601 seconds waiting for clients. 1/2 "
    "clients joined.",
    "nccl-error": "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error",
    "port-in-use": "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address "
    "already in use",
    "nvidia-uvm-missing": "lstat /dev/nvidia-uvm: no such file or directory",
    "driver-mismatch": "Failed to initialize NVML: Driver/library version mismatch",
    "graph-capture-failed": "Exception: Capture cuda graph failed: boom",
    "warmup-failed": "[2026-12-01 10:00:00] Initialization failed. warmup error: Traceback (most recent call last):",
    "scheduler-crashed": "[2026-12-01 10:00:00 TP3] Scheduler hit an exception: Traceback (most recent call last):",
    "watchdog-timeout": "[2026-12-01 10:00:00 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, ...)",
    "health-check-failed": "Health check failed. Server couldn't get a response from detokenizer for last 20 seconds.",
    "p2p-unavailable": "CustomAllreduce is disabled because your platform lacks GPU P2P capability or P2P test failed.",
    "nan-sanitized": "[2026-12-01 10:00:00 TP0] NaN detected in logits; values were sanitized before sampling. This "
    "usually indicates numerical overflow (e.g. fp16 activations) or an upstream bug producing NaN. Logged once; "
    "further occurrences are silent.",
    "python-traceback": "Traceback (most recent call last):",
    # round two: lines from the captures in tests/fixtures/sglang/logs-round2 (sglang#831, sglang#22987, slime#1314)
    "no-kernel-image": "RuntimeError: RMSNorm failed with error code no kernel image is available for execution on "
    "the device",
    "cuda-illegal-memory-access": "CUDA error: an illegal memory access was encountered",
    "flashinfer-jit-build-failed": "FileNotFoundError: [Errno 2] No such file or directory: 'ninja'",
    # the last line of sglang#167's traceback (tests/fixtures/sglang/logs-round2/sglang-167-…)
    "python-module-missing": "ModuleNotFoundError: No module named 'zmq'",
}


def test_every_signature_has_a_unit_line_and_is_registered():
    names = {s.name for s in SIGNATURES}
    assert names - {"transformers-model-type-generic"} == set(LINES)
    reg = registered()
    for sig in SIGNATURES:
        assert sig.check_name in reg and sig.cause and sig.fix


# Whether the server is down after the line, from reading each line (not from the product's levels): an
# exception out of the launch, the scheduler or the distributed init ends the server; SGLang's own warnings
# (custom all-reduce off, the DeepGEMM scale format, the Transformers version) and a traceback with nothing
# else known around it do not say the server stopped.
# read from the log texts: a warning SGLang logs and serves on (the sanitized NaN step, P2P off), or a traceback
# no signature knows
NOT_FATAL = {"p2p-unavailable", "nan-sanitized", "python-traceback"}


@pytest.mark.parametrize("name", sorted(LINES))
def test_signature_line(name: str):
    scanner = LogScanner()
    found = scanner.feed(LINES[name])
    assert f"sglang.log.{name}" in {f.check for f in found}
    (mine,) = [f for f in found if f.check == f"sglang.log.{name}"]
    fatal = name not in NOT_FATAL
    assert scanner.fatal is fatal
    assert mine.level is (Level.FAIL if fatal else Level.WARN)


def test_sglang_ignored_optional_import_is_not_a_missing_module():
    # a line of a public SGLang 0.5 start-up log (code index file id 54492931244): SGLang skips a model class whose
    # import failed and serves on
    line = (
        "[2026-07-01 15:18:58 TP4] Ignore import error when loading sglang.srt.models.bailing_moe_linear: "
        "No module named 'vllm'"
    )
    s = LogScanner()
    assert not s.feed(line) and not s.fatal


def test_generic_keyerror_needs_transformers_context():
    s = LogScanner()
    assert not s.feed("KeyError: 'foo_bar'")
    s.feed('  File "/x/transformers/models/auto/configuration_auto.py", line 1360, in from_pretrained')
    assert [f.check for f in s.feed("KeyError: 'foo_bar'")] == ["sglang.log.transformers-model-type-generic"]


def test_a_signature_is_reported_once_and_collects_lines():
    s = LogScanner()
    assert s.feed(LINES["nccl-timeout"]) and not s.feed(LINES["nccl-timeout"])
    assert len(s.hits) == 1 and [n for n, _ in s.hits[0].lines] == [1, 2]


def test_prefixes_are_stripped():
    assert message("[2026-02-26 15:56:59] ERROR: KeyError: 'glm_moe_dsa'") == "KeyError: 'glm_moe_dsa'"
    assert message("[2026-12-01 10:00:00 TP3 DP1 EP2] Load weight end. elapsed=1 s") == "Load weight end. elapsed=1 s"
    assert message(' (SGLangEngine pid=12589)   File "x.py", line 1, in f') == 'File "x.py", line 1, in f'
    assert (
        message("Dec 01 10:00:00 gpu1 sglang[4242]: [2026-12-01 10:00:00 TP0] KV Cache is allocated.")
        == "KV Cache is allocated."
    )
    assert message("[rank4]:[E1016 03:31:38.9 ProcessGroupNCCL.cpp:621] x") == "x"  # c10/glog prefix off too


def test_tqdm_bars_and_carriage_returns():
    s = LogScanner()
    bar = "Loading safetensors checkpoint shards:  50% Completed | 40/80 [00:10<00:10,  3.9it/s]"
    found = s.feed(bar + "\r" + bar + "[2026-12-01 10:00:00 TP0] Scheduler hit an exception: Traceback")
    assert [f.check for f in found] == ["sglang.log.scheduler-crashed"]
    assert s.phases.state.phase is Phase.LOADING_WEIGHTS
    assert message("  0%|          | 1/4016 [00:24<27:11:00, 24.37s/it]NaN or Inf found") == "NaN or Inf found"


def test_oom_during_load_says_so():
    s = LogScanner()
    s.feed("[2026-12-01 10:00:00 TP0] Load weight begin. avail mem=94.20 GB")
    f = s.feed(LINES["cuda-oom"])[0]
    assert f.cause and f.cause.startswith("during weight loading")


def test_phases_with_0_5_23_spellings():
    t = PhaseTracker()
    lines = [
        "[2026-12-01 10:00:00 TP0] Load weight begin. avail mem=94.20 GB",
        "[2026-12-01 10:00:40 TP0] Load weight end. elapsed=36.1 s, type=GlmMoeDsaForCausalLM, avail mem=38.1 GB",
        "[2026-12-01 10:00:41 TP0] KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 464768, KV size: 21 GB",
        "[2026-12-01 10:00:42 TP0] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1",
    ]
    for line in lines:
        t.feed(message(line))
    assert t.state.phase is Phase.GRAPH_CAPTURE and t.capture_in_progress and t.state.kv_tokens == 464768
    t.feed(message("Capture target decode CUDA graph end. bs=[1, 2, 4], elapsed=200.1 s, mem usage=3.1 GB"))
    t.feed(message("INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)"))
    assert t.state.phase is Phase.HTTP_UP and not t.capture_in_progress
    t.feed(message("[2026-12-01 10:04:10] The server is fired up and ready to roll!"))
    assert t.state.phase is Phase.READY and t.state.ready_lines == 1
    t.feed(message("Load weight end. again"))
    assert t.state.phase is Phase.READY  # never goes back


def test_0_5_9_spellings():
    t = PhaseTracker()
    t.feed(message("[2024-12-13 01:44:59 TP0] Capture cuda graph begin. This can take up to several minutes."))
    assert t.capture_in_progress
    t.feed(message("[2024-12-13 01:45:01 TP0] Capture cuda graph end. Time elapsed: 2.19 s"))
    assert not t.capture_in_progress and t.state.phase is Phase.GRAPH_CAPTURED


def test_the_nan_sanitized_warning_does_not_declare_a_live_server_crashed() -> None:
    # SGLANG_SANITIZE_NAN_LOGITS=1: 0.5.23 logs this once and keeps serving (utils/async_probe.py:41)
    s = LogScanner()
    assert [f.check for f in s.feed(LINES["nan-sanitized"])] == ["sglang.log.nan-sanitized"] and not s.fatal
    assert [f.check for f in s.feed("AssertionError: NaN detected! logits")] == ["sglang.log.nan-in-sampling"]
    assert s.fatal


def test_texts_gone_from_sglang_0523_are_no_signature() -> None:
    # absent from the 0.5.23 wheel (grep): TpModelWorkerClient, the DeepGEMM scale and RoPE warnings;
    # page_table_1_flattened is a declared field there (layers/attention/dsa_backend.py:295). (The 0.5.9-era NaN
    # check's "Detected errors during sampling! NaN in the logits." is gone from 0.5.23 too, but doctor reads
    # older servers' logs: it is a WARN, never a crash; tests/unit/serve/test_logscan_round2.py.)
    gone = (
        "TpModelWorkerClient hit an exception: x",
        "DeepGemm is enabled but the scale_fmt of checkpoint is not ue8m0.",
        "Transformers version 5.2.0 is used for model type glm_moe_dsa.",
    )
    for line in gone:
        s = LogScanner()
        assert s.feed(line) == [], line
    names = {sig.name for sig in SIGNATURES}
    assert not names & {"deepgemm-scale-format", "transformers-rope-warning", "dsa-metadata-attribute"}


def test_each_signature_is_in_the_check_catalog_with_its_title_cause_and_fix(monkeypatch: pytest.MonkeyPatch):
    """What ``gpuhost doctor`` and the reference pages list for a signature (registered at import; registered
    again here into an empty catalog, so the registration itself runs under the test)."""
    from gpuhost.checks import finding
    from gpuhost.serve.logscan import signatures

    monkeypatch.setattr(finding, "_REGISTRY", {})
    signatures._register()
    info = registered()["sglang.log.scheduler-crashed"]
    assert (info.name, info.title, info.group) == (
        "sglang.log.scheduler-crashed",
        "A scheduler (TP rank) died",
        "sglang-log",
    )
    sig = next(s for s in SIGNATURES if s.name == "scheduler-crashed")
    assert (info.meaning, info.fix) == (sig.cause, sig.fix) and info.meaning and info.fix
    assert set(registered()) == {s.check_name for s in SIGNATURES}


def test_patterns_are_compiled_regular_expressions():
    from gpuhost.serve.logscan.signatures import _p

    (one, two) = _p(r"^a\d$", "b")
    assert one.match("a1") and not one.match("a") and two.search("xbx")
