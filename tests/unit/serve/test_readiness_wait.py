"""Readiness as a wait, run from journal lines alone: a real SGLang start-up log (tests/fixtures/sglang/logs, see
SOURCE.md) fed as successive looks at the start, through the runner's own polling loop on a fake clock.

Where no public capture has the lines (0.5.23's warm-up, autotune and JIT texts inside the capture window, its
port-wait lines), the lines are SGLang 0.5.23's and FlashInfer 0.7.2's own format strings filled in, each named
next to it; the expected stage and verdict are a human reading of what SGLang does then.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gpuhost.core.actions import RunCommand
from gpuhost.facts.serve import ProofState, ServiceState, Watch
from gpuhost.operations.sglang import ReadyArgs, SglangReady
from gpuhost.serve import readiness
from tests.wait_harness import Readings, run_waits

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "sglang" / "logs"
ROUND2 = LOGS.parent / "logs-round2"
TOKEN = "b" * 32
MARKER = f"gpuhost-sglang: start {TOKEN} profile=p argv-sha256=x"
CONFIG = "c" * 64


def looks(lines: list[str], upto: list[int], health: list[int | None], active: str = "active") -> list[Watch]:
    """A look after each count of lines in ``upto`` (the journal grows between looks)."""
    return [
        Watch("\n".join(["an earlier start's lines", MARKER, *lines[:n]]), active, code, None, TOKEN)
        for n, code in zip(upto, health, strict=True)
    ]


def ready_op(**kw: object) -> SglangReady:
    args = {"url": "http://10.0.0.5:30000", "config_sha256": CONFIG, "subject": "CT 230 sglang", "poll_s": 2.0}
    return SglangReady(ReadyArgs.model_validate({**args, **kw}))


def host(watches: list[Watch], *, cache_warm: bool = True) -> Readings:
    state = ServiceState("active", TOKEN, {"config_sha256": CONFIG})
    first = watches[0]
    return Readings(
        {"sglang start-up": iter([first, *watches])},  # the plan's one look, then the wait's
        {"sglang service": state, "sglang cache": cache_warm, "sglang proof record": ProofState("812@5000", {})},
    )


def fixture(name: str) -> list[str]:
    return (LOGS / name).read_text().splitlines()


def test_a_crash_signature_ends_the_wait_early_with_its_diagnosis() -> None:
    lines = fixture("sglang-2468-warmup-failed.log")  # load, capture, Uvicorn up, then the warm-up request fails
    crash = lines.index(next(ln for ln in lines if "Initialization failed. warmup error" in ln))
    upto = [1, 3, 4, 9, crash + 1, len(lines), len(lines)]
    watches = looks(lines, upto, [None, None, None, 502, 502, None, None])
    h = host(watches)
    (out,) = run_waits(ready_op(timeout_s=3600).plan(h), h)  # type: ignore[arg-type]
    assert not out.ok
    assert out.message.startswith("CT 230 sglang crashed while starting (HTTP up, warming up): Warm-up request failed")
    assert "fix: read the traceback after this line" in out.message
    assert h.looks == 1 + 6  # the crash line at the 5th look, confirmed by the 6th: long before the hour's bound
    assert out.actions == ()  # a crashed server is not stopped by gpuhost: it is down already


def test_a_start_that_never_gets_ready_times_out_saying_where_it_stood() -> None:
    lines = fixture("sglang-2468-warmup-failed.log")
    up = [ln for ln in lines if "Uvicorn running on" in ln]
    n = lines.index(up[0]) + 1
    watches = looks(lines, [n] * 40, [503] * 40)
    h = host(watches)
    (out,) = run_waits(ready_op(timeout_s=60).plan(h), h)  # type: ignore[arg-type]
    assert not out.ok
    assert out.message.startswith("gave up after 60 s waiting until CT 230 sglang ready at http://10.0.0.5:30000")
    assert "(phase: HTTP up, warming up, /health 503); gpuhost serve logs" in out.message


def test_a_fired_up_line_of_an_earlier_start_does_not_count() -> None:
    old = Watch(
        "\n".join(["The server is fired up and ready to roll!", MARKER, "Load weight begin. avail mem=90.00 GB"]),
        "active",
        200,
        None,
        TOKEN,
    )
    assert readiness.ready(old, "CT 230 sglang") is None
    now = Watch(old.journal + "\nThe server is fired up and ready to roll!", "active", 200, None, TOKEN)
    assert readiness.ready(now, "CT 230 sglang") == "ready, 0 graph captures"


# the capture window of 0.5.23, its lines as the source prints them (model_runner_components/cuda_graph_setup.py:759,
# runner/flashinfer_autotune.py:304/369, flashinfer 0.7.2 jit/core.py:594 and autotuner.py:1048/1071,
# runner/decode_cuda_graph_runner.py:1343 and cuda_graph_setup.py:788)
BEGIN = "[2026-12-01 10:00:00 TP0] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, avail mem=9.61 GB"
JIT = (
    "2026-12-01 10:00:05,123 - INFO - core.py:594 - flashinfer.jit: Building JIT module fused_moe_120; "
    "this can take several minutes on first use."
)
AUTOTUNE = (
    "[2026-12-01 10:01:00 TP0] Running FlashInfer autotune with cache: "
    "/root/.cache/sglang/flashinfer/autotune/0.7.2/sm120/0123456789abcdef/rank_tp0_pp0_dp0.json"
)
TUNING = (
    "2026-12-01 10:01:00,200 - INFO - autotuner.py:1048 - flashinfer.jit: [Autotuner]: Autotuning process starts ..."
)
TUNED = "[2026-12-01 10:20:00 TP0] FlashInfer autotune completed."
BAR = "Capturing batches (bs=64 avail_mem=9.50 GB):   0%|          | 0/12 [00:00<?, ?it/s]"
END = (
    "[2026-12-01 10:21:00 TP0] Capture target decode CUDA graph end. bs=[1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64], "
    "elapsed=1260.00 s, mem usage=0.87 GB, avail mem=8.74 GB."
)
WINDOW = [BEGIN, JIT, AUTOTUNE, TUNING, TUNED, BAR, END]


def stage_of(lines: list[str]) -> str:
    w = Watch("\n".join([MARKER, *lines]), "active", None, None, TOKEN)
    return readiness.stage(w, "s", readiness.Bounds()).name


def test_warm_up_autotune_and_jit_are_stages_of_their_own_inside_the_capture_window() -> None:
    assert [stage_of(WINDOW[:n]) for n in range(1, len(WINDOW) + 1)] == [
        "kernel warm-up (in the CUDA graph capture window)",
        "JIT compilation of fused_moe_120",
        "FlashInfer autotune",  # the JIT build ended with the next line
        "FlashInfer autotune",
        "kernel warm-up (in the CUDA graph capture window)",
        "CUDA graph capture",  # the bar is the capture itself
        "CUDA graphs captured",
    ]


def test_a_long_autotune_is_not_a_capture_hang_and_each_stage_has_its_bound() -> None:
    # 19 minutes of autotune, then a capture of one minute: nothing overruns a 30-min bound per stage, though the
    # window was open for 21 minutes; an overall capture-window timer of 20 minutes would have stopped this start
    lines = [*WINDOW[:4]] * 1
    watches = (
        looks(lines, [1] * 3, [None] * 3)
        + looks(lines, [4] * 570, [None] * 570)
        + looks([*lines, TUNED, BAR], [6] * 30, [None] * 30)
        + looks(
            [*lines, TUNED, BAR, END, "[2026-12-01 10:21:05] The server is fired up and ready to roll!"], [8], [200]
        )
    )
    h = host(watches)
    (out,) = run_waits(ready_op(capture_timeout_s=1200, autotune_timeout_s=1800).plan(h), h)  # type: ignore[arg-type]
    assert out.ok and out.message == "ready, 1 graph capture", out.message


def test_an_autotune_past_its_bound_stops_the_server_and_names_the_autotune_off_fallback() -> None:
    watches = looks(WINDOW[:4], [1] + [4] * 100, [None] * 101)
    h = host(watches)
    op = ready_op(autotune_timeout_s=60, autotune_fallback="glm5-nvfp4-tp8-sm120-autotune-off", fallback="x-breakable")
    (out,) = run_waits(op.plan(h), h)  # type: ignore[arg-type]
    assert not out.ok and out.actions == (RunCommand("systemctl stop gpuhost-sglang.service"),)
    assert out.message.startswith("FlashInfer autotune did not finish; CT 230 sglang: the server was stopped. Fix: ")
    assert (
        "gpuhost launch sglang --profile glm5-nvfp4-tp8-sm120-autotune-off --allow-restart (autotune off)"
        in out.message
    )
    assert out.message.endswith("(FlashInfer autotune for 62 s, bound 60 s)")


def test_a_first_start_gets_the_longer_autotune_bound() -> None:
    watches = looks(WINDOW[:4], [1] + [4] * 100, [None] * 101)
    h = host(watches, cache_warm=False)
    op = ready_op(autotune_timeout_s=60, first_autotune_timeout_s=120, timeout_s=100, first_timeout_s=1000)
    (out,) = run_waits(op.plan(h), h)  # type: ignore[arg-type]
    # neither the restart's autotune bound (60 s) nor its overall bound (100 s) applied: the cache was empty
    assert not out.ok and out.message.endswith("(FlashInfer autotune for 2.0 min, bound 2.0 min)"), out.message


def test_a_capture_that_never_ends_is_a_hang_with_the_capture_fallback() -> None:
    lines = [BEGIN, AUTOTUNE, TUNED, BAR]
    watches = looks(lines, [4] * 100, [None] * 100)
    h = host(watches)
    (out,) = run_waits(ready_op(capture_timeout_s=30, fallback="lab-breakable").plan(h), h)  # type: ignore[arg-type]
    assert not out.ok and out.message.startswith("CUDA graph capture hang: the capture did not end")
    assert "gpuhost launch sglang --profile lab-breakable --allow-restart" in out.message
    assert out.actions == (RunCommand("systemctl stop gpuhost-sglang.service"),)


def test_sglang_waiting_for_a_busy_port_is_not_a_crash() -> None:
    # 0.5.23 srt/utils/network.py wait_port_available: what it logs while an old process still holds a port
    waiting = [
        "[2026-12-01 10:00:11] The port 30001 is in use, but we could not find the process that uses it.",
        "[2026-12-01 10:00:15] port 30001 is in use. Waiting for 15 seconds for port_base to be available. "
        "port_base is used by a process already. process.name()='python3' process.cmdline()=['python3'] "
        "process.status()='sleeping' pid=4242",
    ]
    w = Watch("\n".join([MARKER, *waiting]), "active", None, None, TOKEN)
    assert readiness.failed(w, "s") is None
    given_up = "ValueError: port_base at 30001 is not available in 30 seconds. port_base at 30001 is not available"
    w = Watch("\n".join([MARKER, *waiting, given_up]), "active", None, None, TOKEN)
    assert "Port already in use" in (readiness.failed(w, "s") or "")


def test_each_stage_is_reported_as_progress(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="gpuhost.progress")
    lines = [*WINDOW, "[2026-12-01 10:21:05] The server is fired up and ready to roll!"]
    watches = looks(lines, [1, 2, 3, 5, 6, 7, 8], [None] * 6 + [200])
    h = host(watches)
    (out,) = run_waits(ready_op().plan(h), h)  # type: ignore[arg-type]
    shown = [r.getMessage() for r in caplog.records if getattr(r, "host", "") == "pve1"]
    assert out.ok and shown == [
        "CT 230 sglang readiness: kernel warm-up (in the CUDA graph capture window)",
        "CT 230 sglang readiness: JIT compilation of fused_moe_120",
        "CT 230 sglang readiness: FlashInfer autotune",
        "CT 230 sglang readiness: kernel warm-up (in the CUDA graph capture window)",
        "CT 230 sglang readiness: CUDA graph capture",
        "CT 230 sglang readiness: CUDA graphs captured",
        "CT 230 sglang readiness: ready, 1 graph capture",
    ]


def test_an_init_cuda_graphs_frame_is_evidence_of_capture() -> None:
    # sglang#4205: no capture line at all, but the scheduler died inside init_cuda_graphs
    lines = fixture("sglang-4205-init-cuda-graphs-traceback.log")
    w = Watch("\n".join([MARKER, *lines]), "failed", None, None, TOKEN)
    said = readiness.failed(w, "CT 230 sglang") or ""
    assert said.startswith("CT 230 sglang crashed while starting (CUDA graph capture): A scheduler (TP rank) died")


def test_once_http_is_up_no_capture_is_open_whether_or_not_an_end_line_came() -> None:
    # a version that prints the begin line and the capture bar but no end line (the 0.5.23 texts, no end)
    lines = [
        BEGIN,
        BAR,
        "[2026-12-01 10:03:00] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
    ]
    scanner = readiness.scan(Watch("\n".join([MARKER, *lines]), "active", 503, None, TOKEN), "s")
    assert not scanner.phases.capture_in_progress and scanner.phases.state.graph_captures_open == 0
    assert stage_of(lines) == "HTTP up, warming up"  # no capture bound runs once the server listens
    assert stage_of(lines[:2]) == "CUDA graph capture"


def test_stages_passed_between_two_looks_are_reported_too(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="gpuhost.progress")
    lines = [*WINDOW, "[2026-12-01 10:21:05] The server is fired up and ready to roll!"]
    h = host(looks(lines, [1, 8], [None, 200]))  # the second look comes when it is all over
    (out,) = run_waits(ready_op().plan(h), h)  # type: ignore[arg-type]
    shown = [r.getMessage().split(": ", 1)[1] for r in caplog.records if getattr(r, "host", "") == "pve1"]
    assert out.ok and shown == [
        "kernel warm-up (in the CUDA graph capture window)",
        "JIT compilation of fused_moe_120",
        "FlashInfer autotune",
        "kernel warm-up (in the CUDA graph capture window)",
        "CUDA graph capture",
        "CUDA graphs captured",
        "ready, 1 graph capture",
    ]


@pytest.mark.parametrize(
    "name",
    [
        # sglang#7324: shards loaded, FlashInfer JIT, then only the bar (no capture begin line in the paste), stuck
        "sglang-7324-capture-bar-only-stuck-after-jit.log",
        # sglang#12402: nothing but bar lines (each with a launcher's "[0] " after the \r), stuck at 33/52
        "sglang-12402-capture-bar-flashmla-stuck.log",
    ],
)
def test_a_real_log_whose_only_sign_of_capture_is_the_bar_is_in_capture(name: str) -> None:
    lines = (ROUND2 / name).read_text().splitlines()
    assert stage_of(lines) == "CUDA graph capture"


def test_a_real_capture_stuck_on_the_bar_alone_is_a_capture_hang() -> None:
    lines = (ROUND2 / "sglang-12402-capture-bar-flashmla-stuck.log").read_text().splitlines()
    watches = looks(lines, [len(lines)] * 100, [None] * 100)
    h = host(watches)
    (out,) = run_waits(ready_op(capture_timeout_s=30, fallback="lab-breakable").plan(h), h)  # type: ignore[arg-type]
    assert not out.ok and out.message.startswith("CUDA graph capture hang: the capture did not end")
    assert out.actions == (RunCommand("systemctl stop gpuhost-sglang.service"),)


def test_a_second_real_start_without_a_capture_end_line_waits_through_the_capture_and_is_ready() -> None:
    # SGLang's docs CI, 2024-11-01 (SOURCE.md): one begin line (TP0) at 07:53:32, no end line, the KV pool line
    # 9 s later, Uvicorn, then "fired up"; the capture is watched until HTTP comes up, then counted as done
    lines = (ROUND2 / "sglang-docs-nb-20241101-capture-begin-no-end-ready.log").read_text().splitlines()
    begin = next(i for i, ln in enumerate(lines) if "Capture cuda graph begin" in ln)
    uvicorn = next(i for i, ln in enumerate(lines) if "Uvicorn running on" in ln)
    assert stage_of(lines[:begin]) == "KV cache allocated"
    assert stage_of(lines[: begin + 1]) == "kernel warm-up (in the CUDA graph capture window)"
    assert stage_of(lines[:uvicorn]) == "kernel warm-up (in the CUDA graph capture window)"  # max_total_num_tokens
    assert stage_of(lines[: uvicorn + 1]) == "HTTP up, warming up"
    watches = looks(lines, [begin + 1, uvicorn, uvicorn + 1, len(lines)], [None, None, 503, 200])
    h = host(watches)
    (out,) = run_waits(ready_op(capture_timeout_s=30).plan(h), h)  # type: ignore[arg-type]
    assert out.ok and out.message == "ready, KV 442913 tokens, 1 graph capture", out.message


def test_a_real_version_with_no_capture_end_line_is_up_once_uvicorn_runs() -> None:
    # sglang#1953 (Nov 2024): two "Capture cuda graph begin" lines (TP0, TP1), no end line, Uvicorn up 45 s later
    lines = (ROUND2 / "sglang-1953-nan-logits-after-startup-amd.log").read_text().splitlines()
    uvicorn = next(i for i, ln in enumerate(lines) if "Uvicorn running on" in ln)
    assert stage_of(lines[:2]) == "kernel warm-up (in the CUDA graph capture window)"
    scanner = readiness.scan(Watch("\n".join([MARKER, *lines[: uvicorn + 1]]), "active", 503, None, TOKEN), "s")
    assert not scanner.phases.capture_in_progress
    assert stage_of(lines[: uvicorn + 1]) == "HTTP up, warming up"
