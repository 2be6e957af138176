"""What a launch compares in /server_info: the field names SGLang 0.5.23 reports (its resolved_dict keys)."""

from __future__ import annotations

from gpuhost.roles.sglang import server_info_expectation
from gpuhost.serve.profile import load_profiles


def test_the_pinned_fp4_gemm_backend_is_compared_under_sglangs_field_name() -> None:
    expect = server_info_expectation(load_profiles()["glm5-nvfp4-tp8-sm120"])
    # --fp4-gemm-backend is the field fp4_gemm_runner_backend (0.5.23 arg_groups/fields/exec_.py:282-290)
    assert expect["fp4_gemm_runner_backend"] == "flashinfer_cutlass"
    assert "fp4_gemm_backend" not in expect
    assert expect["moe_runner_backend"] == "flashinfer_cutlass" and expect["version"] == "0.5.23"
