"""The stand-in's SIMULATED decode-speed model (``_lab/speed.py``) read as its docstring states it, and the
per-variant lab faults ``gpuhost tune``'s tests switch on."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from gpuhost.lab.sglang.standin._lab import config, speed


def args(**kw: object) -> argparse.Namespace:
    base = {"moe_runner_backend": "flashinfer_cutlass", "disable_flashinfer_autotune": False}
    return argparse.Namespace(**{**base, **kw})


def test_graphs_within_their_bound_cost_nothing_and_eager_small_batches_pay_most() -> None:
    a = args(cuda_graph_max_bs_decode=64)
    assert speed.factor(a, 1) == 1.0 and speed.factor(a, 64) == 1.0
    # above the bound: eager, 0.5 x min(1, 16 / batch) more per token
    assert speed.factor(a, 128) == pytest.approx(1.0625)
    off = args(cuda_graph_backend_decode="disabled")
    assert speed.factor(off, 1) == pytest.approx(1.5) and speed.factor(off, 16) == pytest.approx(1.5)
    assert speed.factor(off, 32) == pytest.approx(1.25)


def test_the_untuned_and_the_triton_moe_runner_are_slower_and_the_radix_cache_is_neutral() -> None:
    assert speed.factor(args(disable_flashinfer_autotune=True), 8) == pytest.approx(1.25)
    assert speed.factor(args(moe_runner_backend="triton"), 8) == pytest.approx(1.5)
    assert speed.factor(args(disable_radix_cache=True), 8) == speed.factor(args(), 8) == 1.0


def test_a_fast_wrong_variant_decodes_in_half_the_time() -> None:
    assert speed.factor(args(), 8, fast_wrong=True) == pytest.approx(0.5)


def test_variant_faults_match_the_flag_and_its_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "variant_faults"
    f.write_text("fast-wrong --disable-radix-cache\ncrash --max-running-requests 1024\n# crash --port\n")
    monkeypatch.setattr(config, "VARIANT_FAULTS_FILE", str(f))
    assert config.variant_faults(["--port", "30000", "--disable-radix-cache"]) == {"fast-wrong"}
    assert config.variant_faults(["--max-running-requests", "1024"]) == {"crash"}
    assert config.variant_faults(["--max-running-requests", "64"]) == set()
