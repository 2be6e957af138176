"""The SGLang stand-in without a lab: its parser against the real flag tables, its answers, the
wheels and the index it is published in, and the power model of the simulated GPUs."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from gpuhost.lab.node.nvidia import load
from gpuhost.lab.node.nvidia.gpus import Gpu
from gpuhost.lab.pypi.index import index_url, write_index
from gpuhost.lab.sglang import wheels
from gpuhost.lab.sglang.standin._lab import argtable, engine


def table(version: str) -> dict[str, object]:
    return json.loads(wheels.flags_file(version).read_text())


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (
            ["--pp", "2"],
            "ambiguous option: --pp could match --pp-size, --pp-max-micro-batch-size, --pp-async-batch-depth",
        ),
        (["--enable-nan-detection"], "unrecognized arguments: --enable-nan-detection"),
        (["--moe-runner-backend", "b12x"], "argument --moe-runner-backend: invalid choice: 'b12x'"),
        (["--tp-size", "eight"], "argument --tp-size/--tensor-parallel-size: invalid int value: 'eight'"),
    ],
)
def test_parser_fails_like_sglang_0523(argv: list[str], error: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        argtable.build_parser(table("0.5.23")).parse_args(argv)
    assert exc.value.code == 2
    assert error in capsys.readouterr().err.splitlines()[-1]


def test_parser_accepts_the_suggested_profile_and_prefixes() -> None:
    args = argtable.build_parser(table("0.5.23")).parse_args(
        "--model-path m --tp 8 --dp 1 --quantization modelopt_fp4 --kv-cache-dtype fp8_e4m3 "
        "--moe-runner-backend flashinfer_cutlass --disable-shared-experts-fusion --reasoning-parser glm45 "
        "--tool-call-parser glm47 --cuda-graph-max-bs-decode 64 --enable-metrics --no-enable-tf32-matmul".split()
    )
    assert (args.tp_size, args.kv_cache_dtype, args.cuda_graph_max_bs_decode) == (8, "fp8_e4m3", 64)
    assert args.enable_metrics is True and args.enable_tf32_matmul is False and args.port == 30000


def test_old_table_still_knows_the_flags_0523_dropped() -> None:
    args = argtable.build_parser(table("0.5.8.post1")).parse_args(
        ["--model-path", "m", "--cuda-graph-max-bs", "8", "--nsa-decode-backend", "fa3", "--enable-nan-detection"]
    )
    assert (args.cuda_graph_max_bs, args.nsa_decode_backend, args.enable_nan_detection) == (8, "fa3", True)


def test_answers_are_deterministic_and_respect_max_tokens() -> None:
    assert engine.answer_for("What is 17*23? Answer with just the number.")[1] == "391"
    assert engine.answer_for("What is the capital of France?")[1] == "Paris"
    short = engine.complete("What is 2+2?", 3, thinking=True)
    assert short.content == [] and short.finish_reason == "length"  # all budget spent on reasoning
    assert "".join(engine.complete("What is 2+2?", None, thinking=True).content).strip() == "4"
    assert engine.complete("x", 50, thinking=False, ignore_eos=True).completion_tokens == 50


def test_wheels_embed_their_flag_table_and_the_index_links_them(tmp_path: Path) -> None:
    built = wheels.build_all(tmp_path / "dist")
    sglang = next(p for p in built if p.name == "sglang-0.5.23-py3-none-any.whl")
    with zipfile.ZipFile(sglang) as zf:
        assert json.loads(zf.read("sglang/_lab/flags.json"))["sglang_version"] == "0.5.23"
        assert b'__version__ = "0.5.23"' in zf.read("sglang/_lab/version.py")
        meta = zf.read("sglang-0.5.23.dist-info/METADATA").decode()
    assert "Requires-Dist: transformers==5.19.0" in meta and "Requires-Python: >=3.11" in meta
    simple = write_index(tmp_path, built)
    page = (simple / "sglang" / "index.html").read_text()
    assert 'href="sglang-0.5.23-py3-none-any.whl#sha256=' in page and (simple / "flashinfer-python").is_dir()
    assert index_url("127.0.0.9") == "http://127.0.0.9:3141/pypi/simple"


def test_power_rises_with_requests_in_flight() -> None:
    gpu = Gpu.from_dict(
        {
            "index": 3,
            "bdf": "0000:41:00.0",
            "name": "RTX",
            "device_id": "2bb5",
            "subsys_id": "204e",
            "uuid": "GPU-x",
            "serial": "1",
            "vbios": "v",
            "memory_mib": 97887,
            "bar1_mib": 131072,
            "arch": "Blackwell",
            "compute_cap": "12.0",
            "numa": 0,
            "cpulist": "0-7",
            "root_complex": 0,
            "switch": None,
            "gen_max": 5,
            "width_max": 16,
            "idle_gen": 1,
            "irq": 100,
            "needs_open_module": True,
            "power_limit_w": 600,
        }
    )
    idle = load.power(gpu, load.Load())
    assert 80 <= idle <= 90
    assert idle < load.power(gpu, load.Load(inflight=4)) < load.power(gpu, load.Load(inflight=16)) <= 600
    assert load.utilization(load.Load(inflight=8)) == 50


def test_the_client_tokenizer_is_found_only_where_transformers_looks_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuhost.lab.sglang.standin._lab import tokenizer

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HF_HOME", raising=False)
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    snap = tmp_path / "cache" / "models--nvidia--GLM-5-NVFP4" / "snapshots" / "0123abc"
    snap.mkdir(parents=True)
    (snap / "tokenizer.json").write_text("{}")
    # transformers 5.19.0 utils/hub.py:620-623, the text the real client dies with outside the default cache
    with pytest.raises(OSError, match="We couldn't connect to 'https://huggingface.co' to load the files"):
        tokenizer.resolve("nvidia/GLM-5-NVFP4")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    assert tokenizer.resolve("nvidia/GLM-5-NVFP4") == str(snap)
    assert tokenizer.resolve(str(snap)) == str(snap)  # a directory is read as it is


def test_nan_logits_at_temperature_zero_give_token_zero_and_null_logprobs() -> None:
    done = engine.nan_greedy(engine.complete("What is 17*23?", 8, thinking=False))
    assert "".join(done.content) != "391" and set(done.content) == {"!"} and done.nan
    assert engine.logprob_entry("!", 1, 0, nan=True)["logprob"] is None


def test_admission_bound_is_the_flag_or_the_standins_default() -> None:
    import argparse

    from gpuhost.lab.sglang.standin._lab.server import admission_bound

    assert admission_bound(argparse.Namespace(max_running_requests=1024)) == 1024
    assert admission_bound(argparse.Namespace(max_running_requests=None)) == 64


def test_the_lab_models_tokenizer_loads_with_the_real_tokenizers_library(tmp_path: Path) -> None:
    # transformers 5.19.0's AutoTokenizer loads this snapshot offline too (checked by hand: a 294 MB install,
    # too heavy for CI); tokenizers is what reads tokenizer.json under it
    from tokenizers import Tokenizer

    from gpuhost.lab.sglang.model import write_snapshot

    snap = write_snapshot(tmp_path / "snap")
    tok = Tokenizer.from_file(str(snap / "tokenizer.json"))
    assert tok.encode("the model is serving").ids == [1, 2, 3, 4]
    assert tok.token_to_id("<think>") is not None and tok.decode([0]) == "!"


def test_the_decode_line_says_when_the_batch_outgrows_the_graphs_and_requests_wait(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import argparse
    import threading

    from gpuhost.lab.sglang.standin._lab import server

    args = argparse.Namespace(
        max_running_requests=4, cuda_graph_max_bs_decode=2, cuda_graph_backend_decode=None, disable_cuda_graph=False
    )
    state = server.State.__new__(server.State)
    state.args, state.lock, state.running, state.queued, state.max_total_tokens = args, threading.Lock(), 4, 8, 18000

    def once(_seconds: float) -> None:
        if getattr(once, "done", False):
            raise SystemExit
        once.done = True  # type: ignore[attr-defined]

    monkeypatch.setattr(server.time, "sleep", once)
    with pytest.raises(SystemExit):
        server.decode_log(state)
    line = capsys.readouterr().err
    # the shape of sglang 0.5.23 metrics_reporter.py:963,1037-1041 for a non-hybrid pool
    assert "Decode batch, #running-req: 4, #token: 2048, token usage: 0.11, cuda graph: False, " in line
    assert line.rstrip().endswith("#queue-req: 8")
