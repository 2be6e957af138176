"""Start-up as SGLang does it: resolve the arguments, check the hardware, load, allocate, capture."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from . import config, multinode, texts
from .gpus import Device, devices
from .version import __version__

DSA_ARCHS = ("GlmMoeDsaForCausalLM", "DeepseekV32ForCausalLM")
VERSION = tuple(int(p) for p in __version__.split(".")[:3] if p.isdigit())


class StartupError(Exception):
    """Raised in a "scheduler": printed as SGLang prints a child's exception."""

    def __init__(self, exc_type: str, message: str, where: str = "TP0") -> None:
        super().__init__(message)
        self.exc_type, self.message, self.where = exc_type, message, where


def log(message: str, rank: str | None = None) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    prefix = f"[{stamp} {rank}]" if rank else f"[{stamp}]"
    sys.stderr.write(f"{prefix} {message}\n")
    sys.stderr.flush()


@dataclass
class Model:
    path: str
    config: dict[str, Any]
    shards: list[tuple[str, int]] = field(default_factory=list)

    @property
    def arch(self) -> str:
        archs = self.config.get("architectures") or ["LlamaForCausalLM"]
        return str(archs[0])

    @property
    def context_len(self) -> int:
        return int(self.config.get("max_position_embeddings", 202752))


def _snapshot_dir(model_path: str) -> str | None:
    if os.path.isdir(model_path):
        return model_path
    home = os.environ.get("HF_HUB_CACHE") or os.path.join(
        os.environ.get("HF_HOME", os.path.expanduser("~/.cache/huggingface")), "hub"
    )
    repo = os.path.join(home, "models--" + model_path.replace("/", "--"))
    try:
        with open(os.path.join(repo, "refs", "main")) as fh:
            ref = fh.read().strip()
    except OSError:
        return None
    snap = os.path.join(repo, "snapshots", ref)
    return snap if os.path.isdir(snap) else None


def load_model(model_path: str, trust_remote_code: bool) -> Model:
    snap = _snapshot_dir(model_path)
    if snap is None:
        raise StartupError(
            "OSError",
            (
                "We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them in the "
                "cached files.\nCheck your internet connection or see how to run the library in offline mode at "
                "'https://huggingface.co/docs/transformers/installation#offline-mode'."
            ),
            where="",
        )
    import transformers  # the installed one decides whether it knows the model type

    transformers.AutoConfig.from_pretrained(snap, trust_remote_code=trust_remote_code)
    with open(os.path.join(snap, "config.json")) as fh:
        cfg = json.load(fh)
    shards: list[tuple[str, int]] = []
    index = os.path.join(snap, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as fh:
            sizes = json.load(fh).get("metadata", {}).get("shard_sizes", {})
        shards = sorted(sizes.items())
    return Model(snap, cfg, shards)


def resolve(args: argparse.Namespace, model: Model, gpus: tuple[Device, ...]) -> list[str]:
    """SGLang's auto choices for this model and GPU (arg_groups/overrides.py); returns the log lines."""
    lines: list[str] = []
    major = gpus[0].major if gpus else 0
    is_dsa = model.arch in DSA_ARCHS
    explicit_dsa = any(getattr(args, k, None) for k in ("dsa_prefill_backend", "dsa_decode_backend"))
    if explicit_dsa and getattr(args, "kv_cache_dtype", "auto") == "auto":
        lines.append(
            "When specifying --dsa-prefill-backend or --dsa-decode-backend, you should also explicitly set "
            "--kv-cache-dtype (e.g., 'fp8_e4m3' or 'bfloat16'). DeepSeek V3.2 defaults to FP8 KV cache "
            "which may not be compatible with all backends."
        )
    if is_dsa and args.kv_cache_dtype == "auto" and major >= 10:
        args.kv_cache_dtype = "fp8_e4m3"
        lines.append(
            texts.fill("dsa_kv_dtype", "fp8_e4m3", major)
            if texts.known("dsa_kv_dtype")
            else f"Setting KV cache dtype to fp8_e4m3 for DeepSeek DSA on SM{major} device."
        )
    if (
        VERSION >= (0, 5, 17)
        and model.arch == "GlmMoeDsaForCausalLM"
        and major == 12
        and args.kv_cache_dtype == "fp8_e4m3"
    ):
        if args.dsa_prefill_backend is None and args.dsa_decode_backend is None:
            args.dsa_prefill_backend = args.dsa_decode_backend = "flashinfer_sparse_mla"
            lines.append(
                "Set DSA backends for GLM FP8 KV Cache on SM120/SM121: prefill=flashinfer_sparse_mla, "
                "decode=flashinfer_sparse_mla."
            )
        args.dsa_prefill_backend = args.dsa_prefill_backend or "flashinfer_sparse_mla"
        args.dsa_decode_backend = args.dsa_decode_backend or "flashinfer_sparse_mla"
    if (
        getattr(args, "moe_runner_backend", "auto") == "auto"
        and args.quantization == "modelopt_fp4"
        and major in (11, 12)
    ):
        args.moe_runner_backend = "flashinfer_cutlass"
        lines.append(
            "Use flashinfer_cutlass as MoE runner backend on SM110/SM120 for modelopt_fp4 "
            "(trtllm-gen MoE kernels are SM100-only)"
        )
    if getattr(args, "tp_size", 1) > 2 and not getattr(args, "disable_custom_all_reduce", False):
        args.disable_custom_all_reduce = True
        lines.append(
            "CustomAllreduce is disabled because it's not supported on more than two PCIe-only GPUs. "
            "To silence this warning, specify disable_custom_all_reduce=True explicitly."
        )
    return lines


def _fusion_requested(args: argparse.Namespace) -> bool:
    backend = getattr(args, "flashinfer_allreduce_fusion_backend", None)
    return bool(getattr(args, "enable_flashinfer_allreduce_fusion", False)) or backend not in (None, "none", "")


def check(args: argparse.Namespace, model: Model, gpus: tuple[Device, ...]) -> None:
    """The known-bad combinations, with the error each raises on real hardware."""
    if not gpus:
        raise StartupError("RuntimeError", "No CUDA GPUs are available", where="")
    ranks = multinode.local_ranks(args)  # this node's share of tp_size x pp_size
    if len(ranks) > len(gpus):
        raise StartupError(
            "RuntimeError",
            "CUDA error: invalid device ordinal\nCUDA kernel errors might be "
            "asynchronously reported at some other API call, so the stacktrace below might be "
            "incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1",
            where=f"TP{ranks[len(gpus)]}",
        )
    major = gpus[0].major
    if _fusion_requested(args) and major not in (9, 10):
        if VERSION >= (0, 5, 15):
            raise StartupError("ValueError", texts.fill("allreduce_fusion_arch"))
        raise StartupError("RuntimeError", "No supported CUDA architectures found for major versions [9, 10].")
    if model.arch == "GlmMoeDsaForCausalLM" and major == 12 and VERSION >= (0, 5, 17):
        selected = {args.dsa_prefill_backend, args.dsa_decode_backend} - {None}
        if args.kv_cache_dtype == "fp8_e4m3":
            bad = selected - {"flashinfer_sparse_mla", "triton_sparse_mla"}
            if bad:
                raise StartupError(
                    "ValueError",
                    "GLM DSA with FP8 KV cache on NVIDIA SM120/SM121 supports only "
                    "flashinfer_sparse_mla (default) or triton_sparse_mla (prefill), but got "
                    f"{sorted(bad)}.",
                )
        elif "flashinfer_sparse_mla" in selected:
            raise StartupError(
                "ValueError",
                (
                    "flashinfer_sparse_mla supports only GLM DSA with FP8 KV cache on NVIDIA SM120/SM121; "
                    f"got model_arch={model.arch!r}, sm_major={major}, kv_cache_dtype={_torch_dtype(args)}, "
                    f"prefill_impl={args.dsa_prefill_backend!r}, decode_impl={args.dsa_decode_backend!r}."
                ),
            )
    if major == 12 and model.arch in DSA_ARCHS:
        for key in ("nsa_prefill_backend", "nsa_decode_backend", "dsa_prefill_backend", "dsa_decode_backend"):
            if VERSION < (0, 5, 17) and getattr(args, key, None) in ("trtllm", "flashmla_sparse", "flashmla_kv"):
                # the kernels of these backends are built for SM90/SM100 only (flashinfer JIT)
                raise StartupError("RuntimeError", "No supported CUDA architectures found for major versions [9, 10].")
        if VERSION < (0, 5, 17) and not any(getattr(args, k, None) for k in ("attention_backend",)):
            raise StartupError("RuntimeError", "Assertion failed: Unsupported architecture")
    if major == 12 and getattr(args, "moe_runner_backend", None) == "flashinfer_trtllm":
        # trtllm-gen fused MoE is JIT-built for SM100 only (flashinfer/jit/fused_moe.py)
        raise StartupError("RuntimeError", "No supported CUDA architectures found for major versions [10].")


def _torch_dtype(args: argparse.Namespace) -> str:
    return {
        "fp8_e4m3": "torch.float8_e4m3fn",
        "fp8_e5m2": "torch.float8_e5m2",
        "auto": "torch.bfloat16",
        "bf16": "torch.bfloat16",
        "bfloat16": "torch.bfloat16",
    }.get(args.kv_cache_dtype, "torch.uint8")


def oom_text(gpu: Device) -> str:
    total = gpu.memory_mib / 1024
    return (
        f"CUDA out of memory. Tried to allocate 1.75 GiB. GPU 0 has a total capacity of {total:.2f} GiB of which "
        f"1.02 GiB is free. Including non-PyTorch memory, this process has {total - 1.04:.2f} GiB memory in use. "
        f"Of the allocated memory {total - 2.9:.2f} GiB is allocated by PyTorch, and 1.21 GiB is reserved by "
        "PyTorch but unallocated. If reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
        "Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )


def fail(exc: StartupError) -> None:
    """How a scheduler's exception reaches the log, then the launcher's reaction."""
    tb = (
        "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3/site-packages/sglang/srt/managers/scheduler.py", line 3104, in '
        "run_scheduler_process\n    scheduler = Scheduler(\n"
        f"{exc.exc_type}: {exc.message}"
    )
    if exc.where:
        log(texts.fill("scheduler_exception", tb), exc.where)
        log(texts.fill("sigquit"))
    else:
        sys.stderr.write(
            tb.replace(
                "run_scheduler_process\n    scheduler = Scheduler(",
                "launch_server\n    tokenizer_manager = TokenizerManager(",
            )
            + "\n"
        )


def weights(args: argparse.Namespace, model: Model, gpus: tuple[Device, ...]) -> float:
    """Load weights with a tqdm-like progress; returns the GB used per GPU."""
    total_gb = sum(size for _, size in model.shards) / 1e9 if model.shards else 433.0
    per_gpu = float(total_gb / max(1, int(args.tp_size)))
    avail = gpus[0].memory_mib / 1024 - 0.5
    for r in multinode.local_ranks(args):
        log(texts.fill("load_weight_begin", avail), f"TP{r}")
    n = max(1, len(model.shards) or 8)
    start = time.monotonic()
    for i in range(n + 1):
        elapsed = time.monotonic() - start
        rate = f"{i / elapsed:.2f}it/s" if i and elapsed > 0 else "?it/s"
        pct = int(100 * i / n)
        sys.stderr.write(
            f"Loading safetensors checkpoint shards: {pct:>3}% Completed | {i}/{n} "
            f"[{int(elapsed) // 60:02d}:{int(elapsed) % 60:02d}<00:00, {rate}]\n"
        )
        sys.stderr.flush()
        if i == n // 2 and "oom-on-load" in config.faults():
            raise StartupError("torch.OutOfMemoryError", oom_text(gpus[0]))
        if i < n:
            config.pause(1.6 / n)
    elapsed = time.monotonic() - start
    quant = f"quant={args.quantization}, " if args.quantization else ""
    for r in multinode.local_ranks(args):
        if VERSION >= (0, 5, 15):
            line = texts.fill("load_weight_end", elapsed, model.arch, quant, avail - per_gpu, per_gpu)
        else:  # 0.5.8.post1: type, dtype, avail mem, mem usage
            line = texts.fill("load_weight_end", model.arch, "torch.bfloat16", avail - per_gpu, per_gpu)
        log(line, f"TP{r}")
    return per_gpu


def kv_cache(args: argparse.Namespace, avail: float) -> tuple[int, float]:
    frac = args.mem_fraction_static if args.mem_fraction_static is not None else 0.85
    kv_gb = max(1.0, avail * frac * 0.6)
    tokens = int(kv_gb * 1e9 / 52_000) // 64 * 64
    dtype = _torch_dtype(args)
    for r in multinode.local_ranks(args):
        if VERSION >= (0, 5, 12):
            log(f"KV Cache is allocated. dtype: {dtype}, #tokens: {tokens}, KV size: {kv_gb:.2f} GB", f"TP{r}")
        else:
            log(f"KV Cache is allocated. #tokens: {tokens}, KV size: {kv_gb:.2f} GB", f"TP{r}")
    return tokens, kv_gb


def graph_disabled(args: argparse.Namespace) -> bool:
    return (
        bool(getattr(args, "disable_cuda_graph", False))
        or getattr(args, "cuda_graph_backend_decode", None) == "disabled"
    )


def _cache_dir() -> str:
    """SGLANG_CACHE_DIR, default ~/.cache/sglang (0.5.23 srt/environ.py: SGLANG_CACHE_DIR); FlashInfer's JIT builds
    go below it too (environ.py third_party_cache_defaults: FLASHINFER_WORKSPACE_BASE)."""
    return os.path.expanduser(os.environ.get("SGLANG_CACHE_DIR") or "~/.cache/sglang")


def _autotunes(args: argparse.Namespace) -> bool:
    """0.5.23 runner/flashinfer_autotune.py should_run_flashinfer_autotune: not with --disable-flashinfer-autotune;
    on for the flashinfer_cutlass MoE runner and for modelopt_fp4's FlashInfer FP4 GEMM."""
    if getattr(args, "disable_flashinfer_autotune", False):
        return False
    moe = getattr(args, "moe_runner_backend", None) or "auto"
    return moe.startswith("flashinfer_") or args.quantization in ("modelopt_fp4", "modelopt_mixed")


def _jit_log(message: str) -> None:
    """FlashInfer's JIT logger format (flashinfer 0.7.2 jit/core.py FlashInferJITLogger)."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S") + ",000"
    sys.stderr.write(f"{stamp} - INFO - core.py:594 - flashinfer.jit: {message}\n")
    sys.stderr.flush()


def warmup(args: argparse.Namespace, rank: str) -> None:
    """What 0.5.23 runs inside the capture window before the first batch is captured
    (runner/decode_cuda_graph_runner.py _capture: self.warmup(); runner/base_runner.py _warmup): kernels built on
    first use (flashinfer jit/core.py:594, cold builds only), then FlashInfer autotune (runner/flashinfer_autotune.py
    :304 and :369, flashinfer autotuner.py:1048 and :1071). A first start (nothing in the cache) compiles and tunes
    from scratch and takes longer; the results stay in the cache for the next start."""
    cache = os.path.join(_cache_dir(), "flashinfer", "autotune", "0.7.2", "sm120", "lab")
    result = os.path.join(cache, "rank_tp0_pp0_dp0.json")
    cold = not os.path.exists(result)
    config.pause(0.4)
    if cold:
        _jit_log("Building JIT module fused_moe_120; this can take several minutes on first use.")
        config.pause(1.2)
    if not _autotunes(args):
        return
    if "hang-autotune" in config.faults():
        log(f"Running FlashInfer autotune with cache: {result}", rank)
        _jit_log("[Autotuner]: Autotuning process starts ...")
        while True:  # a tactic profile that never returns; only a kill ends it
            time.sleep(3600)
    log(f"Running FlashInfer autotune with cache: {result}", rank)
    _jit_log("[Autotuner]: Autotuning process starts ...")
    config.pause(1.5 if cold else 0.3)
    _jit_log("[Autotuner]: Autotuning process ends")
    os.makedirs(cache, exist_ok=True)
    with open(result, "w") as fh:
        fh.write("{}\n")
    log("FlashInfer autotune completed.", rank)


def capture(args: argparse.Namespace, avail: float) -> None:
    if graph_disabled(args):
        return
    max_bs = getattr(args, "cuda_graph_max_bs_decode", None) or getattr(args, "cuda_graph_max_bs", None) or 256
    bs = [b for b in (1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 96, 128, 160, 192, 224, 256) if b <= max_bs]
    backend = getattr(args, "cuda_graph_backend_decode", None) or "full"
    first = f"TP{multinode.local_ranks(args)[0]}"
    start = time.monotonic()
    if VERSION >= (0, 5, 15):
        log(texts.fill("capture_begin", "target decode", "CUDA graph", backend, 1, avail), first)
    else:
        log(texts.fill("capture_begin", "cuda graph", avail), first)
    if VERSION >= (0, 5, 23):
        warmup(args, first)
    # the bar TP0 draws while it captures, largest batch first (decode_cuda_graph_runner.py:1325-1343, tqdm)
    n = len(bs)
    sys.stderr.write(
        f"Capturing batches (bs={bs[-1]} avail_mem={avail - 0.1:.2f} GB):   0%|          | 0/{n} [00:00<?, ?it/s]\n"
    )
    sys.stderr.flush()
    if "hang-cuda-graph" in config.faults():
        while True:  # the capture never returns (sglang#29580); only a watchdog or a kill ends it
            time.sleep(3600)
    config.pause(0.8)
    elapsed = time.monotonic() - start
    sys.stderr.write(
        f"Capturing batches (bs={bs[0]} avail_mem={avail - 0.87:.2f} GB): 100%|##########| {n}/{n} "
        f"[00:00<00:00, {n / max(elapsed, 0.01):.2f}it/s]\n"
    )
    if VERSION >= (0, 5, 15):
        log(texts.fill("capture_end", "target decode", "CUDA graph", bs, elapsed, 0.87, avail - 0.87), first)
    else:
        log(texts.fill("capture_end", "cuda graph", elapsed, 0.87, avail - 0.87), first)


def wait_port_available(port: int, port_name: str, host: str = "") -> bool:
    """SGLang's wait for a port an old process still holds (0.5.23 srt/utils/network.py wait_port_available): up
    to SGLANG_WAIT_PORT_TIMEOUT (30) tries a second apart, a warning every 5 s after the first 10 (the stand-in
    does not look the holder up, so it prints the "could not find the process" variant). SGLang waits on the ports
    it derives (dist_init_port, port_base, nccl_port, …), which an old process holds as well; the stand-in has one,
    its HTTP port."""
    import socket

    timeout_s = int(os.environ.get("SGLANG_WAIT_PORT_TIMEOUT", "30"))
    for i in range(timeout_s):
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:  # network.py is_port_available: SO_REUSEADDR, bind, close
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
            return True
        except OSError:
            pass
        finally:
            probe.close()
        if i > 10 and i % 5 == 0:
            log(f"The port {port} is in use, but we could not find the process that uses it.")
        time.sleep(1)
    return False


def visible_gpus() -> tuple[Device, ...]:
    return devices()
