"""Role sglang: what is refused before any host is contacted, and the exact start it renders."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from gpuhost.roles.sglang import Launch, SglangVars

BAD = """
profiles:
  - name: tp8-allreduce-fusion
    pins: {sglang: "0.5.23", transformers: "5.19.0", cuda: 13}
    model: nvidia/GLM-5-NVFP4
    model_type: glm_moe_dsa
    architectures: [sm120]
    gpus: 8
    tp_size: 8
    flags: {--enable-flashinfer-allreduce-fusion: true}
  - name: tp8-removed-flag
    pins: {sglang: "0.5.23", transformers: "5.19.0", cuda: 13}
    model: nvidia/GLM-5-NVFP4
    model_type: glm_moe_dsa
    architectures: [sm120]
    gpus: 8
    tp_size: 8
    flags: {--nsa-decode-backend: trtllm}
"""


def vars_for(serve: dict[str, object], tmp_path: Path | None = None, **extra: object) -> SglangVars:
    raw: dict[str, object] = {"containers": {200: {"serve": serve}, 201: {}}, **extra}
    if tmp_path is not None:
        (tmp_path / "bad.yml").write_text(BAD)
        raw["sglang_profile_dirs"] = [str(tmp_path / "bad.yml")]
    return SglangVars.model_validate(raw)


@pytest.mark.parametrize(
    ("profile", "words"),
    [
        ("tp8-allreduce-fusion", ("refused", "allreduce")),
        ("tp8-removed-flag", ("refused", "--nsa-decode-backend")),
    ],
)
def test_known_bad_profiles_are_refused_with_the_reason(tmp_path: Path, profile: str, words: tuple[str, ...]) -> None:
    with pytest.raises(ValidationError) as exc:
        vars_for({"profile": profile}, tmp_path)
    text = str(exc.value)
    assert f"CT 200: profile {profile} refused" in text and all(w in text for w in words)


def test_unknown_profile_and_a_ctid_without_serve_are_refused() -> None:
    with pytest.raises(ValidationError, match="no profile 'nope'"):
        vars_for({"profile": "nope"})
    with pytest.raises(ValidationError, match="CT 201 has no serve: entry"):
        vars_for({"profile": "glm5-nvfp4-tp8-sm120"}, lxc_ctids=[201])


def test_the_shipped_profile_renders_the_exact_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_SGLANG_KEY", "sk-unit-secret")
    v = vars_for(
        {"profile": "glm5-nvfp4-tp8-sm120", "model": "/srv/m", "host": "10.0.0.5", "api_key_env": "TEST_SGLANG_KEY"},
        sglang_p2p={"available": True, "level": "phb"},
    )
    launch = Launch(200, v.selected()[200], v)
    assert launch.argv[:6] == [
        "/opt/gpuhost/sglang/glm5-nvfp4-tp8-sm120/venv/bin/sglang",
        "serve",
        "--model-path",
        "/srv/m",
        "--tp-size",
        "8",
    ]
    assert "--host" in launch.argv and launch.argv[launch.argv.index("--host") + 1] == "10.0.0.5"
    assert "sk-unit-secret" not in " ".join(launch.argv)  # the key reaches SGLang from the env file only
    assert launch.url == "http://10.0.0.5:30000" and launch.served_model == "glm-5"
    assert launch.env["NCCL_P2P_LEVEL"] == "PHB" and "HF_HUB_OFFLINE" not in launch.env  # a path, not a repo
    assert launch.pins == [
        "sglang==0.5.23",
        "transformers==5.19.0",
        "flashinfer-python==0.7.2",
        "torch==2.14.1",
        "sgl-deep-gemm==0.2.3.post2",
    ]
    assert launch.expect == {
        "version": "0.5.23",
        "tp_size": "8",
        "quantization": "modelopt_fp4",
        "kv_cache_dtype": "fp8_e4m3",
        "dsa_prefill_backend": "flashinfer_sparse_mla",
        "dsa_decode_backend": "flashinfer_sparse_mla",
        "moe_runner_backend": "flashinfer_cutlass",
        "fp4_gemm_runner_backend": "flashinfer_cutlass",  # --fp4-gemm-backend's field in 0.5.23
    }
    shown = launch.template_vars(secret=False)["sglang"]
    assert shown["api_key"] == "<secret>" and launch.template_vars(secret=True)["sglang"]["api_key"] == "sk-unit-secret"


def test_a_repo_id_serves_offline_and_profile_override_wins() -> None:
    v = vars_for({"profile": "glm5-nvfp4-tp8-sm120"}, sglang_profile="glm5-nvfp4-tp8-sm120-graph-breakable")
    launch = Launch(200, v.selected()[200], v)
    assert launch.profile.name == "glm5-nvfp4-tp8-sm120-graph-breakable"
    assert launch.model == "nvidia/GLM-5-NVFP4" and launch.env["HF_HUB_OFFLINE"] == "1"
    assert launch.url == "http://127.0.0.1:30000"  # --host 0.0.0.0 is reached on loopback by the probe


def test_a_repo_id_is_downloaded_with_the_token_in_a_0600_file_and_served_offline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gpuhost.operations.lxc import InCt
    from gpuhost.operations.sglang import SecretEnvFile, SglangModel
    from gpuhost.roles.sglang import container_tasks
    from tests.support.scenario import ScenarioHost

    monkeypatch.setenv("TEST_HF_TOKEN", "hf_roleSecret0001")
    v = vars_for(
        {"profile": "glm5-nvfp4-tp8-sm120", "model_revision": "v1.0", "hf_token_env": "TEST_HF_TOKEN"},
        hf_endpoint="http://10.1.2.3:3142",
        sglang_hf_cache="/srv/hf",
    )
    launch = Launch(200, v.selected()[200], v)
    assert launch.env["HF_HUB_OFFLINE"] == "1" and launch.env["HF_HUB_CACHE"] == "/srv/hf"
    assert launch.argv[launch.argv.index("--revision") + 1] == "v1.0"
    assert launch.template_vars(secret=False)["sglang"]["requires"] == ["huggingface_hub"]
    tasks = container_tasks(ScenarioHost({}), 200, v.selected()[200], v)
    ops = {t.name: t.operation.args.operation for t in tasks if isinstance(t.operation, InCt)}
    token = ops["CT 200: /etc/gpuhost/hf-token (0600)"]
    assert isinstance(token, SecretEnvFile) and token.args.secret_values == ("hf_roleSecret0001",)
    (model,) = [op for op in ops.values() if isinstance(op, SglangModel)]
    assert model.args.repo == "nvidia/GLM-5-NVFP4" and model.args.revision == "v1.0"
    assert model.args.cache_dir == "/srv/hf" and model.args.endpoint == "http://10.1.2.3:3142"
    assert model.args.python == "/opt/gpuhost/sglang/glm5-nvfp4-tp8-sm120/venv/bin/python3"
    assert model.args.token_file == "/etc/gpuhost/hf-token"
    names = [t.name for t in tasks]
    assert names.index("CT 200: /etc/gpuhost/hf-token (0600)") > [i for i, n in enumerate(names) if "venv" in n][0]
    assert "hf_roleSecret0001" not in repr(tasks)
