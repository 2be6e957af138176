"""The shipped fallbacks for a start that does not finish: which one launch suggests for which stage, and the
autotune-off fallback is the current profile with FlashInfer autotune off and nothing else changed."""

from __future__ import annotations

from gpuhost.roles.sglang import SglangVars, _fallback
from gpuhost.serve.flagtable import load_table
from gpuhost.serve.profile import load_profiles

CURRENT = "glm5-nvfp4-tp8-sm120"
AUTOTUNE_OFF = "glm5-nvfp4-tp8-sm120-autotune-off"


def test_the_autotune_off_fallback_differs_from_the_current_profile_only_by_autotune() -> None:
    profiles = load_profiles()
    base, off = profiles[CURRENT], profiles[AUTOTUNE_OFF]
    assert off.status == "fallback" and off.fallback_of == CURRENT
    assert off.flags == {**base.flags, "--disable-flashinfer-autotune": True}
    same = ("pins", "model", "model_type", "architectures", "gpus", "tp_size", "entrypoint", "env", "multinode")
    assert {k: getattr(off, k) for k in same} == {k: getattr(base, k) for k in same}


def test_the_flag_is_sglang_0_5_23s() -> None:
    # read in the 0.5.23 wheel (sha256 00b3cd5b…): arg_groups/fields/exec_.py disable_flashinfer_autotune, a switch
    arg = load_table("0.5.23").by_flag()["--disable-flashinfer-autotune"]
    assert arg.dest == "disable_flashinfer_autotune" and arg.action == "store_true"


def test_a_capture_hang_and_an_autotune_overrun_suggest_their_own_fallback() -> None:
    profiles = load_profiles()
    v = SglangVars()
    assert _fallback(profiles[CURRENT], v, autotune=False) == "glm5-nvfp4-tp8-sm120-graph-breakable"
    assert _fallback(profiles[CURRENT], v, autotune=True) == AUTOTUNE_OFF
    assert _fallback(profiles[AUTOTUNE_OFF], v, autotune=True) is None  # autotune is off there already
