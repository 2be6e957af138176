"""Cause and fix that fit the error a signature caught: a signature's line often embeds another error.

``Capture cuda graph failed: <error>`` says only *where* SGLang noticed; the fix depends on ``<error>`` (out of
memory, a closed gloo connection to a peer, a kernel not built for this GPU, an illegal address). A NaN found by
SGLang's sampler is logged and replaced (the server stays up), unlike PyTorch's ``probability tensor contains``
RuntimeError; and the SM120 FP4 race explains it only on logs that show GLM-5, FP4 or SM120.

:data:`VARIANTS` refines a signature's finding: the first variant of that signature whose ``when`` matches the
matched message (and whose ``context``, if set, matched any line seen so far) replaces its cause and fix, and its
level when ``level`` is set. A signature without a fitting variant keeps its own text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuhost.checks import Level


@dataclass(frozen=True)
class Variant:
    signature: str
    when: re.Pattern[str]
    cause: str
    fix: str
    context: re.Pattern[str] | None = None
    level: Level | None = None
    source: str = ""


#: A log that shows GLM-5, an FP4 checkpoint or an SM120 GPU (the case the FP4 GEMM race explanation fits).
GLM5_FP4_SM120 = re.compile(
    r"(?i)\bglm-?5\b|glm_moe_dsa|\bnvfp4\b|modelopt_fp4|\bw4a4|\bfp4\b|\bsm_?120\b|capability\D{0,4}12\.0"
)

_SMALLER_CAPTURE = "lower --cuda-graph-max-bs-decode (--cuda-graph-max-bs on <= 0.5.19) or --mem-fraction-static"

VARIANTS: list[Variant] = [
    # ---- Capture cuda graph failed: <embedded error>
    Variant(
        "graph-capture-failed",
        re.compile(r"(?i)out of memory|OutOfMemoryError|cudaErrorMemoryAllocation"),
        "CUDA-graph capture ran out of GPU memory (its buffers come on top of weights and the KV pool)",
        _SMALLER_CAPTURE,
        source="sglang#5285",
    ),
    Variant(
        "graph-capture-failed",
        re.compile(r"(?i)gloo|Connection closed by peer|Connection reset by peer|Connection cl"),
        "a collective on the CPU (gloo) group lost its TCP connection during capture: another rank or node died "
        "or dropped off the network; the capture is only where this rank noticed",
        "find the rank or node that failed first (its own log; dmesg for Xid or the OOM killer); check the nodes "
        "reach each other on GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME; a smaller capture does not help",
        source="sglang#4205, sglang#3768",
    ),
    Variant(
        "graph-capture-failed",
        re.compile(r"no kernel image is available|cudaErrorNoKernelImageForDevice"),
        "a kernel run during capture has no build for this GPU's compute capability (it fails the same way "
        "without CUDA graphs)",
        "install torch / sgl-kernel / flashinfer builds that include this GPU's architecture (nvidia-smi "
        "--query-gpu=compute_cap; torch.cuda.get_arch_list()); a smaller capture or --disable-cuda-graph does not "
        "help",
        source="sglang#748",
    ),
    Variant(
        "graph-capture-failed",
        re.compile(r"No supported CUDA architectures found|requires SM90 or SM10X|Unsupported architecture"),
        "a kernel selected for capture is built only for other GPU architectures (SM90/SM100)",
        "drop the SM90/SM100-only option (e.g. --enable-flashinfer-allreduce-fusion) or pick backends built for "
        "this GPU; a smaller capture does not help",
        source="sglang#13342, sglang#15650",
    ),
    Variant(
        "graph-capture-failed",
        re.compile(r"illegal memory access|cudaErrorIllegalAddress"),
        "a kernel read or wrote outside its memory during capture",
        "rerun with --disable-cuda-graph: if it serves, the fault is capture-only (report it with the SGLang and "
        "FlashInfer versions); CUDA_LAUNCH_BLOCKING=1 names the kernel; try another --attention-backend or "
        "--moe-runner-backend",
        source="sglang#5029",
    ),
    # ---- NaN: SGLang's own check (logged, replaced, server up) vs PyTorch's RuntimeError
    Variant(
        "nan-in-sampling",
        re.compile(r"Detected errors during sampling"),
        "SGLang's NaN check found NaN in the logits and replaced them; the server keeps serving, but these "
        "requests' output is unreliable. With GLM-5 / FP4 on SM120 this is the CUTLASS FP4 GEMM race "
        "(flashinfer#2708, fixed from flashinfer 0.6.12 / SGLang 0.5.15)",
        "use SGLang >= 0.5.17 with the DSA path; clear the FlashInfer JIT cache; try "
        "--cuda-graph-backend-decode disabled to tell graph from kernel issues",
        context=GLM5_FP4_SM120,
        level=Level.WARN,
        source="sglang#1953, sglang PR #14369; flashinfer#2708",
    ),
    Variant(
        "nan-in-sampling",
        re.compile(r"Detected errors during sampling"),
        "SGLang's NaN check found NaN in the logits and replaced them; the server keeps serving, but these "
        "requests' output is unreliable: fp16 overflow, a kernel or attention-backend fault, or dummy token ids "
        "from a benchmark script (sglang#1764)",
        "if it repeats on real prompts: --dtype bfloat16, another --attention-backend, clear the FlashInfer JIT "
        "cache; --disable-nan-detection only hides it",
        level=Level.WARN,
        source="sglang#1953, sglang#1764, sglang PR #14369",
    ),
    Variant(
        "nan-in-sampling",
        re.compile(r"."),
        "the model produced NaN/inf probabilities and sampling raised: fp16 overflow, a wrong attention backend "
        "or KV dtype, a kernel fault, or a stale JIT cache",
        "try --dtype bfloat16 and another --attention-backend; clear the FlashInfer JIT cache; rerun with "
        "CUDA_LAUNCH_BLOCKING=1 to find the kernel",
        context=None,
        source="InternLM#459",
    ),
    # ---- illegal memory access: who reported it
    Variant(
        "cuda-illegal-memory-access",
        re.compile(r"(?i)flashinfer"),
        "a FlashInfer kernel (named in the line) read or wrote outside its memory; the CUDA context is lost and "
        "the rank dies",
        "try another --attention-backend (or --moe-runner-backend) and a newer FlashInfer; --disable-cuda-graph "
        "tells a graph-replay bug apart; report it with the SGLang and FlashInfer versions and the batch that "
        "triggered it",
        source="sglang#5491, flashinfer#924",
    ),
    Variant(
        "cuda-illegal-memory-access",
        re.compile(r"ProcessGroupNCCL|watchdog"),
        "a CUDA kernel on this rank read or wrote outside its memory; the NCCL watchdog only relays it (CUDA "
        "errors are asynchronous), so neither NCCL nor the network is the cause",
        "rerun with CUDA_LAUNCH_BLOCKING=1 (or compute-sanitizer) to name the kernel; --disable-cuda-graph tells a "
        "graph-replay bug apart; try another --attention-backend / --moe-runner-backend; dmesg shows an Xid if the "
        "GPU itself faulted",
        source="sglang#3892, sglang#22987, sglang#8296",
    ),
    # ---- FlashInfer JIT: what is missing decides the fix
    Variant(
        "flashinfer-jit-build-failed",
        re.compile(r"No such file or directory: 'ninja'|ninja: (?:command )?not found"),
        "FlashInfer compiles its kernels at first use with ninja, and ninja is not installed in the serving "
        "environment",
        "pip install ninja into the serving venv (or install flashinfer-jit-cache / flashinfer-cubin so nothing "
        "is compiled)",
        source="transformerlab/transformerlab-api#381",
    ),
    Variant(
        "flashinfer-jit-build-failed",
        re.compile(r"(?i)nvcc: (?:command )?not found|No such file or directory: '[^']*nvcc'|Could not find nvcc"),
        "FlashInfer's JIT needs nvcc (the CUDA toolkit), and none was found",
        "install the CUDA toolkit matching the torch build and set CUDA_HOME (or use flashinfer-jit-cache / "
        "flashinfer-cubin so nothing is compiled)",
        source="flashinfer#1919, vllm#21960",
    ),
]


#: Every context pattern a variant needs (the engine notes, line by line, which of them the log has shown).
CONTEXTS: tuple[re.Pattern[str], ...] = tuple(dict.fromkeys(v.context for v in VARIANTS if v.context is not None))


def refine(signature: str, text: str, seen: set[re.Pattern[str]]) -> Variant | None:
    """The variant of ``signature`` that fits the matched message ``text``; ``seen``: the contexts shown so far."""
    for v in VARIANTS:
        if v.signature != signature or not v.when.search(text):
            continue
        if v.context is not None and v.context not in seen:
            continue
        return v
    return None
