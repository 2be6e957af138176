from gpuhost.serve.command import nccl_env, render
from gpuhost.serve.facts import P2pSummary
from gpuhost.serve.profile import Profile, load_profiles


def test_render_current_profile():
    cmd = render(load_profiles()["glm5-nvfp4-tp8-sm120"])
    assert cmd.argv[:6] == ["sglang", "serve", "--model-path", "nvidia/GLM-5-NVFP4", "--tp-size", "8"]
    a = cmd.argv
    assert a[a.index("--kv-cache-dtype") + 1] == "fp8_e4m3"
    assert a[a.index("--mem-fraction-static") + 1] == "0.85"
    assert "--disable-shared-experts-fusion" in a and a[a.index("--disable-shared-experts-fusion") + 1].startswith("--")
    assert cmd.env == {"NCCL_IB_DISABLE": "1"}


def test_render_switches_lists_and_explicit_model():
    p = Profile.model_validate(
        {
            "name": "x",
            "pins": {"sglang": "0.5.23", "transformers": "5.19.0"},
            "model": "m",
            "architectures": ["sm90"],
            "gpus": 2,
            "tp_size": 2,
            "entrypoint": ["python3", "-m", "sglang.launch_server"],
            "flags": {
                "--model-path": "/local/m",
                "--tp": 2,
                "--enable-metrics": True,
                "--skip-server-warmup": False,
                "--cuda-graph-bs": [1, 2, 4],
            },
        }
    )
    assert render(p).argv == [
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/local/m",
        "--tp",
        "2",
        "--enable-metrics",
        "--cuda-graph-bs",
        "1",
        "2",
        "4",
    ]


def test_nccl_env_from_p2p_verdict():
    assert nccl_env(None) == {}
    assert nccl_env(P2pSummary(available=True, level="phb")) == {"NCCL_P2P_LEVEL": "PHB"}
    assert nccl_env(P2pSummary(available=True)) == {"NCCL_P2P_LEVEL": "SYS"}
    assert nccl_env(P2pSummary(available=False)) == {"NCCL_P2P_DISABLE": "1"}
    assert nccl_env(P2pSummary(available=True, data_ok=False, level="SYS")) == {"NCCL_P2P_DISABLE": "1"}


def test_verdict_overrides_profile_nccl_p2p_settings():
    p = load_profiles()["glm5-nvfp4-tp8-sm120"].model_copy(update={"env": {"NCCL_P2P_DISABLE": "1", "X": "y"}})
    env = render(p, P2pSummary(available=True, level="SYS")).env
    assert env == {"X": "y", "NCCL_P2P_LEVEL": "SYS"}
