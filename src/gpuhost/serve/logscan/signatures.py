"""Known SGLang crash and warning signatures: pattern, cause, fix, and whether the server is down."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuhost.checks import Level, check


@dataclass(frozen=True)
class Signature:
    """One recognisable failure. ``patterns`` match a message line; ``near`` (if set) must have matched one of
    the ``window`` lines before it (context for a generic line such as ``KeyError: 'x'``)."""

    name: str
    title: str
    level: Level
    patterns: tuple[re.Pattern[str], ...]
    cause: str
    fix: str
    near: re.Pattern[str] | None = None
    window: int = 12
    source: str = ""
    unless: tuple[str, ...] = field(default_factory=tuple)  # skipped when one of these already matched
    max_lines: int = 8

    @property
    def check_name(self) -> str:
        return f"sglang.log.{self.name}"

    @property
    def fatal(self) -> bool:
        return self.level >= Level.FAIL


def _p(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p) for p in patterns)


SIGNATURES: list[Signature] = [
    Signature(
        "bad-arguments",
        "SGLang refused its command line",
        Level.FAIL,
        _p(
            r"error: unrecognized arguments:",
            r"error: ambiguous option:",
            r"error: argument [-\w/ ]+: invalid",
            r"error: argument [-\w/ ]+: expected (?:one|at least one) argument",
            r"error: the following arguments are required",
        ),
        "argparse rejected a flag: unknown or removed in this version, an ambiguous abbreviation (e.g. "
        "--cuda-graph-max-bs, --pp in 0.5.23), or a bad choice/type",
        "check the flags with the validator (gpuhost.serve.validate) against this SGLang version's table",
        source="sglang#12818, sglang#34226; sglang-2026-12 0 item 5",
    ),
    Signature(
        "transformers-model-type",
        "Transformers does not know the model_type",
        Level.FAIL,
        _p(
            r"KeyError: '(glm_moe_dsa|deepseek_v32|glm5_next)'",
            r"does not recognize this architecture",
            r"model type `\w+` but Transformers",
        ),
        "the installed Transformers is older than the checkpoint's model_type (glm_moe_dsa needs >= 5.2.0)",
        "install the Transformers version the SGLang release pins (0.5.23: transformers==5.19.0)",
        source="sglang#19408, zai-org/GLM-5#22, seeds 004",
    ),
    Signature(
        "transformers-model-type-generic",
        "Config lookup failed in Transformers",
        Level.FAIL,
        _p(r"^KeyError: '[\w.-]+'$"),
        "a KeyError raised while Transformers mapped config.json's model_type",
        "upgrade Transformers to a release that knows this model_type",
        near=re.compile(r"configuration_auto|CONFIG_MAPPING"),
        source="sglang#19408",
        unless=("transformers-model-type",),
    ),
    Signature(
        "nan-in-sampling",
        "NaN/inf in the sampling probabilities",
        Level.FAIL,
        _p(
            # torch.multinomial's error: sampled batches only; an all-greedy batch (temperature 0, gpuhost's
            # smoke, canary and bench) takes argmax and never raises it (sglang 0.5.23 layers/sampler.py:207,
            # is_all_greedy): NaN there gives wrong tokens and null logprobs, caught by serve.canary/serve.logprobs
            r"probability tensor contains either .?inf.?, .?nan.? or element < 0",
            # the assert of SGLANG_ENABLE_NAN_LOGITS_CHECK=1 (utils/async_probe.py:129, f"NaN detected! {msg}")
            r"NaN detected! ",
            # older SGLang's own check, logged and the logits replaced (the server stays up; a WARN by the
            # dispatch table): "Detected errors during sampling! NaN in the logits." (sglang#1953, PR #14369)
            r"NaN in the logits",
        ),
        "the model produced NaN/inf logits: on SM120 a CUTLASS FP4 GEMM race (flashinfer#2708, fixed from "
        "flashinfer 0.6.12 / SGLang 0.5.15), a wrong attention backend or KV dtype, or a stale JIT cache",
        "use SGLang >= 0.5.17 with the DSA path; clear the FlashInfer JIT cache; try "
        "--cuda-graph-backend-decode disabled to tell graph from kernel issues",
        source="seeds 004; flashinfer#2708; InternLM#459; sglang 0.5.23 layers/sampler.py, utils/async_probe.py",
    ),
    Signature(
        "nan-sanitized",
        "NaN logits sanitized before sampling (server still up)",
        Level.WARN,
        _p(r"NaN detected in .*; values were sanitized before sampling"),
        "with SGLANG_SANITIZE_NAN_LOGITS=1 SGLang replaces NaN logits and keeps serving, logging this once "
        "(sglang 0.5.23 utils/async_probe.py:41): the answers of that step are not the model's",
        "treat it as the NaN crash: run gpuhost verify serve (canary, logprobs); see sglang.log.nan-in-sampling",
        source="sglang 0.5.23 utils/async_probe.py:41, environ.py SGLANG_SANITIZE_NAN_LOGITS",
    ),
    Signature(
        "cuda-oom",
        "CUDA out of memory",
        Level.FAIL,
        _p(
            r"CUDA out of memory",
            r"torch\.OutOfMemoryError",
            r"OutOfMemoryError: CUDA",
            r"Failed to CUDA calloc",
            r"cudaErrorMemoryAllocation",
        ),
        "weights + KV pool + CUDA-graph buffers exceed the GPU's memory",
        "lower --mem-fraction-static (e.g. 0.85 -> 0.80) or the capture size (--cuda-graph-max-bs-decode, "
        "--cuda-graph-max-bs on <= 0.5.19)",
        source="sglang#5285",
    ),
    Signature(
        "kv-pool-too-small",
        "No room left for the KV cache",
        Level.FAIL,
        _p(r"Not enough memory\. Please try to increase --mem-fraction-static"),
        "after the weights there is not enough memory for the KV pool",
        "raise --mem-fraction-static or lower --context-length / --max-running-requests",
        source="sglang-2026-12 4.2",
    ),
    Signature(
        "arch-unsupported-kernel",
        "Kernel not built for this GPU architecture",
        Level.FAIL,
        _p(
            r"No supported CUDA architectures found for major versions",
            r"requires SM90 or SM10X",
            r"Unsupported architecture",
            r"out of resource: shared memory",
        ),
        "a kernel built only for SM90/SM100 was selected on this GPU: FlashInfer allreduce fusion "
        "('[9, 10]'), trtllm-gen MoE/attention, or a Triton config larger than SM120's 100 KB shared memory",
        "drop --enable-flashinfer-allreduce-fusion / --flashinfer-allreduce-fusion-backend; use "
        "flashinfer_cutlass MoE and flashinfer_sparse_mla DSA backends on SM120",
        source="sglang#15650, sglang#13342, seeds 000",
    ),
    Signature(
        "dsa-backend-refused",
        "SGLang refused the DSA backend for this GPU/KV dtype",
        Level.FAIL,
        _p(
            r"supports only flashinfer_sparse_mla",
            r"flashinfer_sparse_mla supports only GLM DSA",
            r"you should also explicitly set --kv-cache-dtype",
        ),
        "on SM120 with FP8 KV only flashinfer_sparse_mla (and triton_sparse_mla for prefill) is accepted",
        "leave --dsa-*-backend unset or set flashinfer_sparse_mla; set --kv-cache-dtype fp8_e4m3",
        source="sglang-2026-12 1.2 (flash_mla_sm120.py)",
    ),
    Signature(
        "shared-experts-mismatch",
        "Shared-expert fusion shape mismatch at load",
        Level.FAIL,
        _p(r"The size of tensor a \(3072\) must match the size of tensor b \(6144\)"),
        "shared-expert fusion of an NVFP4 checkpoint whose shared experts are BF16 (SGLang 0.5.15-0.5.18)",
        "add --disable-shared-experts-fusion",
        source="InferenceX#2335, sglang#29562",
    ),
    Signature(
        "nccl-timeout",
        "NCCL collective timed out",
        Level.FAIL,
        _p(
            r"Watchdog caught collective operation timeout",
            r"collective timeout",
            r"ProcessGroupNCCL's watchdog got stuck",
            r"Some NCCL operations have failed or timed out",
        ),
        "a rank stopped taking part in a collective: another rank crashed, a GPU pair cannot do P2P, or "
        "the PCIe/IOMMU path stalls",
        "look for the first failing rank above; run gpuhost verify p2p; try NCCL_P2P_LEVEL from the verdict "
        "(NCCL_P2P_DISABLE=1 only if P2P is really off); rerun with NCCL_DEBUG=INFO",
        source="sglang#1693, sglang#10216",
    ),
    Signature(
        "dist-init-timeout",
        "The nodes of a multi-node replica did not meet at rank 0's rendezvous",
        Level.FAIL,
        _p(
            r"The client socket has timed out after \d+m?s while trying to connect to",
            r"Timed out after \d+ seconds waiting for clients\. \d+/\d+ clients joined",
            r"The client socket has failed to connect to any network address of",
        ),
        "a rank did not reach rank 0's --dist-init-addr within --dist-timeout: rank 0 not started (a follower "
        "waits for it), a follower not started (rank 0 waits for it), or the nodes cannot reach each other on the "
        "rendezvous port",
        "start rank 0, then every follower within --dist-timeout (gpuhost launch sglang does, in that order); open "
        "dist_init_port between the nodes; check dist_init_host and socket_ifname",
        source="torch c10d socket.cpp/TCPStore.cpp; sglang#2561, sglang#7478, vllm#19670",
    ),
    Signature(
        "nccl-error",
        "NCCL error",
        Level.FAIL,
        _p(
            r"NCCL error",
            r"ncclUnhandledCudaError",
            r"ncclSystemError",
            r"ncclInternalError",
            r"unhandled (?:cuda|system) error",
            r"ncclInvalidUsage",
        ),
        "NCCL failed to set up or run a collective (P2P/IOMMU, shared memory, or a device error)",
        "rerun with NCCL_DEBUG=INFO; check --shm-size/ipc and IOMMU passthrough; run gpuhost verify p2p",
        source="probe-and-sglang (iii)",
    ),
    Signature(
        "port-in-use",
        "Port already in use",
        Level.FAIL,
        _p(
            r"[Aa]ddress already in use",
            r"\[Errno 98\]",
            # the final error once the wait is over: "{port_name} at {port} is not available in {timeout_s} seconds."
            # (0.5.23 srt/utils/network.py); the names are dist_init_port, port_base, nccl_port, metrics_port, …
            r"\b(?:\w+_port|port_base) at \d+ is not available",
            # not the lines SGLang prints while it waits for the port (up to SGLANG_WAIT_PORT_TIMEOUT, 30 s): "The
            # port N is in use, but we could not find the process that uses it." and "port N is in use. Waiting
            # for i seconds for X to be available." (0.5.23 srt/utils/network.py, wait_port_available)
            r"port \d+ is (?:already )?in use(?!, but we could not find)(?!\. Waiting for \d+ seconds)",
        ),
        "another process (often a previous server that did not exit) holds the port",
        "stop the old server (and check GPU memory is freed) or pick another --port",
        source="wandb/openui#226, gpustack#5842, sglang PR #16556",
    ),
    Signature(
        "nvidia-uvm-missing",
        "/dev/nvidia-uvm missing",
        Level.FAIL,
        _p(r"/dev/nvidia-uvm\b.*(?:no such file|not found|missing)", r"nvidia-uvm.*(?:failed|missing)"),
        "the nvidia_uvm module is not loaded on the host, or its device node is not passed into the "
        "container/LXC (CUDA cannot initialise without it)",
        "modprobe nvidia_uvm (and nvidia-modprobe -u -c=0) on the host; bind /dev/nvidia-uvm and "
        "/dev/nvidia-uvm-tools into the CT",
        source="NVIDIA/nvidia-docker#139; canonical/lxd#5618",
    ),
    Signature(
        "driver-mismatch",
        "NVIDIA driver and CUDA (or NVML) do not match",
        Level.FAIL,
        _p(
            r"Error 80[34]",
            r"unsupported display driver / cuda driver combination",
            r"forward compatibility was attempted",
            r"Driver/library version mismatch",
            r"CUDA driver version is insufficient",
        ),
        "the container's CUDA runtime needs a newer driver than the host's kernel module, or the "
        "user-space driver libraries differ from the loaded module",
        "install the same driver version in host and CT; CUDA 13 builds (SGLang >= 0.5.20) need R580+",
        source="intelligent-machine-learning/atorch#2",
    ),
    Signature(
        "graph-capture-failed",
        "CUDA graph capture failed",
        Level.FAIL,
        _p(r"Capture cuda graph failed", r"(?i)capture \w+(?: \w+)? cuda graph failed"),
        "an exception during CUDA-graph capture (the line names it: OOM, unsupported kernel, ...)",
        "see the error on the same line; lower --cuda-graph-max-bs-decode or try "
        "--cuda-graph-backend-decode breakable, then disabled",
        source="sglang#15650, sglang#5285",
    ),
    Signature(
        "warmup-failed",
        "Warm-up request failed",
        Level.FAIL,
        _p(r"Initialization failed\. warmup error"),
        "the server started but its first request failed; the process tree is killed",
        "read the traceback after this line; check the scheduler's error above it",
        source="sglang#2468",
    ),
    Signature(
        "scheduler-crashed",
        "A scheduler (TP rank) died",
        Level.FAIL,
        _p(
            r"Scheduler hit an exception",
            r"Received sigquit from a child process",
            r"in run_scheduler_process$",
            r"DataParallelController hit an exception",
        ),
        "a TP/DP rank raised; the whole server goes down with it",
        "find the first exception of the failing rank; the other ranks' NCCL timeouts follow from it",
        source="sglang#4489, seeds 004",
    ),
    Signature(
        "watchdog-timeout",
        "SGLang watchdog fired (forward pass stalled)",
        Level.FAIL,
        _p(r"(?i)\bwatchdog timeout\b(?! \(ms\))", r"Scheduler watchdog timeout"),
        "a forward pass took longer than --watchdog-timeout (first JIT or a hang)",
        "raise --watchdog-timeout for the first start (1200 s); if it repeats, treat as a hang",
        source="",
    ),
    Signature(
        "health-check-failed",
        "Health check failed (detokenizer silent)",
        Level.FAIL,
        _p(r"Health check failed\. Server couldn't get a response from detokenizer"),
        "the scheduler stopped answering; the server marks itself UnHealthy",
        "collect the log, restart; look for a scheduler exception above",
        source="sglang-2026-12 4.1",
    ),
    Signature(
        "p2p-unavailable",
        "Custom all-reduce found no GPU P2P",
        Level.WARN,
        _p(r"[Cc]ustom ?[Aa]llreduce is disabled because your platform lacks GPU P2P capability"),
        "GPU peer-to-peer failed SGLang's own test (at most 2 PCIe GPUs, or NVLink, with custom all-reduce on): "
        "all-reduce goes through host memory. On more than 2 PCIe GPUs SGLang disables custom all-reduce before "
        "this test (sglang 0.5.23 custom_all_reduce_utils.py:492-498), so this line never appears there: "
        "gpuhost verify p2p is what proves P2P on the 8-GPU profiles",
        "run gpuhost verify p2p; fix IOMMU passthrough / pcie=1 / ACS",
        source="sglang 0.5.23 distributed/device_communicators/custom_all_reduce_utils.py:500-508; seeds 004",
    ),
    Signature(
        "cuda-illegal-memory-access",
        "CUDA illegal memory access",
        Level.FAIL,
        _p(r"an illegal memory access was encountered", r"cudaErrorIllegalAddress", r"Warp illegal address"),
        "a CUDA kernel read or wrote outside its memory; the CUDA context is lost, the rank dies and the others "
        "follow. The line that reports it is often not the culprit: CUDA errors are asynchronous",
        "rerun with CUDA_LAUNCH_BLOCKING=1 (or compute-sanitizer) to name the kernel; --disable-cuda-graph tells a "
        "graph-replay bug apart; try another --attention-backend / --moe-runner-backend",
        source="sglang#3892, sglang#22987, sglang#5491, sglang#5029",
    ),
    Signature(
        "no-kernel-image",
        "No kernel image for this GPU",
        Level.FAIL,
        _p(r"no kernel image is available for execution on the device", r"cudaErrorNoKernelImageForDevice"),
        "a CUDA binary (PyTorch, sgl-kernel or FlashInfer: the line names the kernel) has no code for this GPU's "
        "compute capability: Blackwell SM120 (RTX 50xx, RTX PRO 6000) needs CUDA 12.8+ builds, and newer wheels "
        "drop old GPUs (V100 SM70, T4 SM75)",
        "compare nvidia-smi --query-gpu=compute_cap with torch.cuda.get_arch_list(); install the builds for that "
        "architecture (cu128 or later wheels, or the SGLang image for Blackwell); no SGLang flag fixes it",
        source="sglang#748, sglang#831, flashinfer#920, sglang#7249",
    ),
    Signature(
        "flashinfer-jit-build-failed",
        "FlashInfer could not build a kernel (JIT)",
        Level.FAIL,
        _p(
            r"CalledProcessError: Command '\['ninja'",
            r"No such file or directory: 'ninja'",
            r"RuntimeError: Ninja build failed",
            r"(?i)flashinfer.*nvcc: (?:command )?not found",
            r"RuntimeError: Could not find nvcc",
            r"^/bin/sh: \d+: \S*nvcc: not found",
            r"No such file or directory: '[^']*nvcc'",
        ),
        "FlashInfer compiles kernels at first use (JIT, into ~/.cache/flashinfer) with ninja and nvcc; the build "
        "failed or could not start",
        "read the compiler's first 'error:' line above the CalledProcessError; pip install ninja; install the CUDA "
        "toolkit matching torch (SM120 needs nvcc 12.8+) and set CUDA_HOME; remove ~/.cache/flashinfer and retry; "
        "or install flashinfer-jit-cache so nothing is compiled",
        source="THUDM/slime#1314, transformerlab/transformerlab-api#381, flashinfer#1919, vllm#21960",
    ),
    Signature(
        "python-module-missing",
        "A Python module the server imports is not installed",
        Level.FAIL,
        # the last line of an uncaught ImportError; SGLang's own optional imports log "Ignore import error when
        # loading …: No module named …" instead, which this does not match
        _p(r"^ModuleNotFoundError: No module named '[\w.]+'"),
        "the Python environment the server runs in lacks a package it imports (the line names the module): a "
        "partial install, another venv or interpreter than the one SGLang was installed into, or a dependency "
        "this version did not declare",
        "install the missing package into the environment that runs the server (for 'zmq': pip install pyzmq), or "
        "reinstall SGLang with its dependencies there (pip install 'sglang[all]' for that release)",
        source="sgl-project/sglang#167",
    ),
    Signature(
        "python-traceback",
        "Unclassified Python traceback",
        Level.WARN,
        _p(r"^Traceback \(most recent call last\):", r'^File "[^"]+", line \d+, in '),
        "an exception was logged; no known signature matched its lines (the paste may be truncated)",
        "read the last lines of the traceback",
        source="",
        max_lines=2,
    ),
]


def _register() -> None:
    for sig in SIGNATURES:
        check(sig.check_name, title=sig.title, group="sglang-log", meaning=sig.cause, fix=sig.fix)(lambda: None)


_register()
