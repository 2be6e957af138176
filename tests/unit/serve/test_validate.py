import pytest

from gpuhost.checks import Level, registered
from gpuhost.serve.facts import P2pSummary, TargetFacts
from gpuhost.serve.flagcheck import check_flags
from gpuhost.serve.profile import Profile, load_profiles
from gpuhost.serve.rules import RULES, run_rules
from gpuhost.serve.validate import refused, validate

SM120 = TargetFacts(gpu_archs=["sm120"] * 8, driver_version="580.95.05")


@pytest.fixture
def current() -> Profile:
    return load_profiles()["glm5-nvfp4-tp8-sm120"]


def _with(p: Profile, drop: tuple[str, ...] = (), **changes: object) -> Profile:
    data = p.model_dump()
    flags = {k: v for k, v in data["flags"].items() if k not in drop}
    flags.update(changes.pop("flags", {}))  # type: ignore[arg-type]
    data["flags"] = flags
    for key, value in changes.items():
        if key.startswith("pins_"):
            data["pins"][key[5:]] = value
        else:
            data[key] = value
    return Profile.model_validate(data)


def _levels(findings, check: str) -> list[Level]:
    return [f.level for f in findings if f.check == check]


def test_shipped_current_and_fallbacks_pass():
    profiles = load_profiles()
    for name in ("glm5-nvfp4-tp8-sm120", "glm5-nvfp4-tp8-sm120-graph-breakable", "glm5-nvfp4-tp8-sm120-graph-disabled"):
        findings = validate(profiles[name], SM120)
        assert not refused(findings), [f.message for f in findings if f.level >= Level.WARN]


def test_historical_profile_is_refused_on_sm120_for_its_old_release():
    findings = validate(load_profiles()["glm5-nvfp4-tp8-sm120-seeds-2026-02"], SM120)
    assert refused(findings)
    assert Level.FAIL in _levels(findings, "serve.rule.sglang-glm5-sm120")
    assert _levels(findings, "serve.rule.dsa-backend-sm120") == [Level.WARN, Level.WARN]


@pytest.mark.parametrize(
    "flag, value, words",
    [
        (
            "--cuda-graph-max-bs",
            64,
            (
                "ambiguous option, could match --cuda-graph-max-bs-decode, "
                "--cuda-graph-max-bs-prefill; it was a flag of its own until 0.5.19"
            ),
        ),
        ("--nsa-decode-backend", "trtllm", "removed (last in 0.5.19, absent from 0.5.20 on)"),
        ("--enable-nan-detection", True, "removed (last in 0.5.12.post1, absent from 0.5.15.post1 on)"),
        ("--no-such-flag", 1, "unknown to SGLang 0.5.23"),
        ("--kv-cache-dtype", "fp8", "invalid choice: 'fp8'"),
        ("--moe-runner-backend", "b12x", "invalid choice: 'b12x'"),
        ("--reasoning-parser", "glm47", "invalid choice: 'glm47'"),
        ("--mem-fraction-static", "lots", "invalid float value"),
        ("--port", 30000.5, "invalid int value"),
        ("--trust-remote-code", "yes", "is a switch"),
        ("--served-model-name", True, "needs a value"),
    ],
)
def test_flag_refusals(current: Profile, flag: str, value: object, words: str):
    findings = check_flags(_with(current, flags={flag: value}))
    fails = [f for f in findings if f.level is Level.FAIL]
    assert fails and words in fails[0].message, [f.message for f in findings]


def test_abbreviation_and_deprecated_warn(current: Profile):
    findings = check_flags(_with(current, flags={"--tp": 8, "--disable-cuda-graph": True}))
    msgs = [f.message for f in findings if f.level is Level.WARN]
    assert any("--tp: abbreviation of --tp-size" in m for m in msgs)
    assert any("--disable-cuda-graph: deprecated (since 0.5.15.post1)" in m for m in msgs)
    assert not refused(findings)


def test_missing_table_is_refused(current: Profile):
    findings = check_flags(_with(current, pins_sglang="0.5.99"))
    assert findings[0].level is Level.FAIL and "no flag table for SGLang 0.5.99" in findings[0].message


@pytest.mark.parametrize(
    "flags, check",
    [
        ({"--enable-flashinfer-allreduce-fusion": True}, "serve.rule.allreduce-fusion-sm120"),
        ({"--flashinfer-allreduce-fusion-backend": "auto"}, "serve.rule.allreduce-fusion-sm120"),
        ({"--moe-runner-backend": "flashinfer_trtllm"}, "serve.rule.trtllm-moe-sm120"),
        # the other trtllm-gen MoE runners of the 0.5.15-0.5.23 choices (flags/sglang-0.5.21.json):
        # SGLang's server_args picks flashinfer_cutlass on SM120 because all of these are SM100-only
        ({"--moe-runner-backend": "flashinfer_trtllm_routed"}, "serve.rule.trtllm-moe-sm120"),
        ({"--moe-runner-backend": "experimental_sgl_trtllm"}, "serve.rule.trtllm-moe-sm120"),
        ({"--fp4-gemm-backend": "flashinfer_trtllm"}, "serve.rule.trtllm-moe-sm120"),
        ({"--dsa-decode-backend": "trtllm"}, "serve.rule.dsa-backend-sm120"),
        ({"--dsa-prefill-backend": "flashmla_sparse"}, "serve.rule.dsa-backend-sm120"),
        ({"--attention-backend": "triton"}, "serve.rule.fp8-kv-backend"),
        ({"--kv-cache-dtype": "bf16"}, "serve.rule.fp8-kv-backend"),
    ],
)
def test_bad_combinations_fail_on_sm120(current: Profile, flags: dict, check: str):
    findings = run_rules(_with(current, flags=flags), SM120)
    assert Level.FAIL in _levels(findings, check), [(f.check, f.message) for f in findings]


def test_sm120_rules_do_not_fire_on_sm100(current: Profile):
    b200 = TargetFacts(gpu_archs=["sm100"] * 8, driver_version="580.1")
    p = _with(
        current,
        architectures=["sm100"],
        flags={"--moe-runner-backend": "flashinfer_trtllm", "--enable-flashinfer-allreduce-fusion": True},
    )
    assert not refused(run_rules(p, b200))


def test_triton_sparse_mla_prefill_only_from_0_5_22(current: Profile):
    p = _with(current, flags={"--dsa-prefill-backend": "triton_sparse_mla"})
    assert not _levels(run_rules(p, SM120), "serve.rule.dsa-backend-sm120")
    p = _with(current, pins_sglang="0.5.21", flags={"--dsa-prefill-backend": "triton_sparse_mla"})
    assert Level.FAIL in _levels(run_rules(p, SM120), "serve.rule.dsa-backend-sm120")


def test_dsa_backend_without_kv_dtype_warns(current: Profile):
    findings = run_rules(_with(current, drop=("--kv-cache-dtype",)), SM120)
    assert Level.WARN in _levels(findings, "serve.rule.fp8-kv-backend")
    assert not refused(findings)  # auto resolves to fp8_e4m3 on SM12x from 0.5.17


def test_old_sglang_for_glm5_on_sm120(current: Profile):
    old = _with(current, pins_sglang="0.5.15.post1")
    assert Level.FAIL in _levels(run_rules(old, SM120), "serve.rule.sglang-glm5-sm120")
    dense = _with(
        old,
        drop=("--dsa-prefill-backend", "--dsa-decode-backend", "--kv-cache-dtype"),
        flags={"--attention-backend": "triton"},
    )
    assert _levels(run_rules(dense, SM120), "serve.rule.sglang-glm5-sm120") == [Level.WARN]


def test_transformers_older_than_model_type(current: Profile):
    findings = run_rules(_with(current, pins_transformers="4.57.1"), SM120)
    fails = [f for f in findings if f.check == "serve.rule.transformers-model-type"]
    assert fails and fails[0].level is Level.FAIL and "KeyError: 'glm_moe_dsa'" in (fails[0].cause or "")


def test_cuda13_needs_r580(current: Profile):
    old_driver = TargetFacts(gpu_archs=["sm120"] * 8, driver_version="570.172.08")
    assert Level.FAIL in _levels(run_rules(current, old_driver), "serve.rule.cuda-driver")
    assert _levels(run_rules(current, TargetFacts(gpu_archs=["sm120"] * 8)), "serve.rule.cuda-driver") == [Level.INFO]
    assert Level.FAIL in _levels(run_rules(_with(current, pins_cuda=12), SM120), "serve.rule.cuda-driver")


def test_shared_experts_fusion_needed_on_0_5_15(current: Profile):
    p = _with(current, pins_sglang="0.5.15.post1", drop=("--disable-shared-experts-fusion",))
    assert Level.FAIL in _levels(run_rules(p, SM120), "serve.rule.shared-experts-fusion")
    p = _with(current, drop=("--disable-shared-experts-fusion",))
    assert not _levels(run_rules(p, SM120), "serve.rule.shared-experts-fusion")


def test_arch_and_gpu_count(current: Profile):
    assert Level.FAIL in _levels(run_rules(current, TargetFacts(gpu_archs=["sm90"] * 8)), "serve.rule.gpu-arch")
    assert Level.FAIL in _levels(run_rules(current, TargetFacts(gpu_archs=["sm120"] * 4)), "serve.rule.gpu-count")


def test_stale_env_warns(current: Profile):
    p = _with(current, env={"SGLANG_ENABLE_SPEC_V2": "True"})
    assert _levels(run_rules(p, SM120), "serve.rule.stale-env") == [Level.WARN]


def test_nccl_env_check(current: Profile):
    on = TargetFacts(gpu_archs=["sm120"] * 8, driver_version="580.1", p2p=P2pSummary(available=True, level="SYS"))
    assert _levels(validate(current, on), "serve.nccl-env") == [Level.PASS]
    p = _with(current, env={"NCCL_P2P_DISABLE": "1"})
    assert Level.WARN in _levels(validate(p, on), "serve.nccl-env")
    off = TargetFacts(gpu_archs=["sm120"] * 8, driver_version="580.1", p2p=P2pSummary(available=False))
    assert _levels(validate(current, off), "serve.nccl-env") == [Level.WARN]


def test_every_rule_is_registered_with_reason_and_source():
    names = registered()
    assert len(RULES) >= 10
    for info in RULES:
        assert info.name in names and info.reason and info.source
    assert "serve.flags" in names and "serve.nccl-env" in names


@pytest.mark.parametrize("dtype", ["bf16", "bfloat16", "fp8_e5m2"])
def test_glm_dsa_without_fp8_e4m3_kv_is_refused_on_sm120(current: Profile, dtype: str) -> None:
    # 0.5.23 _dsa_split_backend_resolution picks flashinfer_sparse_mla only for GLM + SM12 + fp8_e4m3
    findings = validate(_with(current, flags={"--kv-cache-dtype": dtype}), SM120)
    assert _levels(findings, "serve.rule.dsa-kv-dtype-sm120") == [Level.FAIL] and refused(findings)


def test_auto_kv_resolves_to_fp8_e4m3_and_passes(current: Profile) -> None:
    findings = validate(_with(current, flags={"--kv-cache-dtype": "auto"}), SM120)
    assert _levels(findings, "serve.rule.dsa-kv-dtype-sm120") == []


@pytest.mark.parametrize(
    "value, words",
    [
        ("{bad", "--cuda-graph-config must be JSON"),
        ("[1, 2]", "--cuda-graph-config must be a JSON object, got list"),
        ('{"verify": {}}', "--cuda-graph-config: unknown phase 'verify'"),
        ('{"decode": {"max_seq_len": 4}}', "--cuda-graph-config['decode']: unknown key 'max_seq_len'"),
        ('{"decode": {"backend": "tc_piecewise"}}', "tc_piecewise was removed"),
    ],
)
def test_cuda_graph_config_is_checked_as_sglangs_own_type(current: Profile, value: str, words: str) -> None:
    # the texts of parse_cuda_graph_config_arg (0.5.23 model_executor/cuda_graph_config.py:246-282), exit 2
    findings = check_flags(_with(current, flags={"--cuda-graph-config": value}))
    assert any(f.level is Level.FAIL and words in f.message for f in findings), [f.message for f in findings]


def test_a_good_cuda_graph_config_and_json_list_pass(current: Profile) -> None:
    good = _with(current, flags={"--cuda-graph-config": '{"decode": {"backend": "breakable", "max_bs": 128}}'})
    assert not [f for f in check_flags(good) if f.level >= Level.WARN]
    bad = check_flags(_with(current, flags={"--sidecar-args": "[1,"}))
    assert any(f.level is Level.FAIL and "Invalid JSON list" in f.message for f in bad)


def test_sglang_serve_front_end_takes_model_type(current: Profile) -> None:
    # sglang serve strips --model-type before ServerArgs parses (0.5.23 cli/serve.py:30-58)
    served = check_flags(_with(current, flags={"--model-type": "auto"}))
    assert not [f for f in served if f.level >= Level.WARN], [f.message for f in served]
    launch_server = _with(current, entrypoint=["python3", "-m", "sglang.launch_server"], flags={"--model-type": "auto"})
    assert any("--model-type: unknown to SGLang 0.5.23" in f.message for f in check_flags(launch_server))


@pytest.mark.parametrize("runner", ["flashinfer_cutlass", "triton", "auto"])
def test_moe_runners_that_run_on_sm120_are_not_refused_by_the_trtllm_rule(current: Profile, runner: str):
    findings = run_rules(_with(current, flags={"--moe-runner-backend": runner}), SM120)
    assert _levels(findings, "serve.rule.trtllm-moe-sm120") == []
