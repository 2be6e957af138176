"""The stand-in's start-up where gpuhost's readiness depends on it: it waits for a busy port as SGLang 0.5.23 does
(srt/utils/network.py wait_port_available), and a first start builds and autotunes inside the capture window while
a later one finds its results cached."""

from __future__ import annotations

import argparse
import socket
from pathlib import Path

import pytest

from gpuhost.lab.sglang.standin._lab import config, startup


def test_a_busy_port_is_waited_for_with_sglangs_own_warning(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(startup.time, "sleep", lambda s: None)
    monkeypatch.setenv("SGLANG_WAIT_PORT_TIMEOUT", "21")
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        assert startup.wait_port_available(port, "port", "127.0.0.1") is False
    lines = capsys.readouterr().err.splitlines()
    # network.py: a warning when i > 10 and i % 5 == 0, i.e. after 15 and 20 seconds of 21
    assert [ln.split("] ", 1)[1] for ln in lines] == [
        f"The port {port} is in use, but we could not find the process that uses it."
    ] * 2
    assert startup.wait_port_available(port, "port", "127.0.0.1") is True  # released: no wait, no line
    assert capsys.readouterr().err == ""


def test_a_first_start_builds_and_tunes_and_a_restart_finds_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SGLANG_CACHE_DIR", str(tmp_path / "sglang"))
    monkeypatch.setattr(config, "pause", lambda s: None)
    monkeypatch.setattr(config, "faults", lambda: set())
    args = argparse.Namespace(moe_runner_backend="flashinfer_cutlass", quantization="modelopt_fp4")
    startup.warmup(args, "TP0")
    first = capsys.readouterr().err
    assert "flashinfer.jit: Building JIT module fused_moe_120; this can take several minutes on first use." in first
    assert "Running FlashInfer autotune with cache: " in first and "FlashInfer autotune completed." in first
    startup.warmup(args, "TP0")
    again = capsys.readouterr().err
    assert "Building JIT module" not in again and "FlashInfer autotune completed." in again
    off = argparse.Namespace(disable_flashinfer_autotune=True, moe_runner_backend="flashinfer_cutlass")
    startup.warmup(off, "TP0")
    assert "autotune" not in capsys.readouterr().err
