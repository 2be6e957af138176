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
            r"probability tensor contains either .?inf.?, .?nan.? or element < 0",
            r"NaN detected",
            r"NaN in the logits",
            r"Detected errors during sampling",
        ),
        "the model produced NaN/inf logits: on SM120 a CUTLASS FP4 GEMM race (flashinfer#2708, fixed from "
        "flashinfer 0.6.12 / SGLang 0.5.15), a wrong attention backend or KV dtype, or a stale JIT cache",
        "use SGLang >= 0.5.17 with the DSA path; clear the FlashInfer JIT cache; try "
        "--cuda-graph-backend-decode disabled to tell graph from kernel issues",
        source="seeds 004; flashinfer#2708; InternLM#459",
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
        "dsa-metadata-attribute",
        "Sparse-attention metadata attribute error",
        Level.FAIL,
        _p(r"'\w*(?:Prefill|Decode|NSA|DSA)\w*Metadata' object has no attribute"),
        "the NSA/DSA attention path hit a missing metadata field under chunked prefill at high concurrency "
        "with the radix cache on (page_table_1_flattened)",
        "use SGLang >= 0.5.17 with the DSA path, or --disable-radix-cache",
        source="seeds 000; probe-and-sglang (iii)",
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
            r"\w+_port at \d+ is not available",
            r"port \d+ is (?:already )?in use",
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
            r"TpModelWorkerClient hit an exception",
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
        "GPU peer-to-peer failed SGLang's own test: all-reduce goes through host memory (slow)",
        "run gpuhost verify p2p; fix IOMMU passthrough / pcie=1 / ACS",
        source="probe-and-sglang (iii); seeds 004",
    ),
    Signature(
        "deepgemm-scale-format",
        "DeepGEMM scale-format warning",
        Level.WARN,
        _p(r"DeepGemm is enabled but the scale_fmt of checkpoint is not ue8m0"),
        "DeepGEMM on Blackwell with a non-ue8m0 checkpoint (SGLang <= 0.5.15): possible accuracy loss",
        "use SGLang >= 0.5.17",
        source="seeds 004",
    ),
    Signature(
        "transformers-rope-warning",
        "Transformers version warning for the model type",
        Level.WARN,
        _p(r"Transformers version [\d.]+ is used for model type"),
        "SGLang warns that this Transformers version may mis-handle the model's RoPE parameters",
        "use the Transformers version the SGLang release pins",
        source="seeds 004",
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
