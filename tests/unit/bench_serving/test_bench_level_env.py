"""The shipped bench tool's client environment, from an env file as templates/sglang.env.j2 renders it."""

from __future__ import annotations

from pathlib import Path

from gpuhost.tools import bench_level

ENV = """\
# Managed by gpuhost (templates/sglang.env.j2): the environment of gpuhost-sglang.service, profile p.
# Mode 0600: it holds the server's API key.
HF_HUB_CACHE=/data/hf/hub
HF_HUB_OFFLINE=1
NCCL_IB_DISABLE=1
SGLANG_API_KEY=sk-env-5a1b2c
"""


def test_client_gets_the_servers_hf_cache_offline_and_the_key_as_openai_api_key(tmp_path: Path) -> None:
    path = tmp_path / "sglang.env"
    path.write_text(ENV)
    env = bench_level.client_env({"PATH": "/usr/bin", "HF_HUB_CACHE": "/root/.cache/elsewhere"}, str(path))
    # without HF_HUB_CACHE the real client's AutoTokenizer looks only in the default cache and fails offline
    assert env["HF_HUB_CACHE"] == "/data/hf/hub" and env["HF_HUB_OFFLINE"] == "1"
    assert env["OPENAI_API_KEY"] == "sk-env-5a1b2c" and env["PATH"] == "/usr/bin"
    assert "SGLANG_API_KEY" not in env and "NCCL_IB_DISABLE" not in env


def test_a_local_model_keeps_the_callers_cache(tmp_path: Path) -> None:
    path = tmp_path / "sglang.env"
    path.write_text("NCCL_IB_DISABLE=1\n")
    env = bench_level.client_env({"HOME": "/root"}, str(path))
    assert "HF_HUB_CACHE" not in env and "OPENAI_API_KEY" not in env and env["HF_HUB_OFFLINE"] == "1"
