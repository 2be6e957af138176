"""Known-bad combinations: each rule has its reason and source, and returns findings (FAIL = refuse)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpuhost.checks import Finding, Level, check
from gpuhost.serve.effective import (
    at_least,
    by_dest,
    is_dsa,
    is_fp8,
    is_sm12x,
    kv_dtype,
    sm_major,
)
from gpuhost.serve.facts import TargetFacts
from gpuhost.serve.flagtable import version_key
from gpuhost.serve.profile import Profile

#: model_type → first Transformers release that knows it.
MODEL_TYPE_MIN_TRANSFORMERS = {"glm_moe_dsa": "5.2.0"}

#: Lowest driver branch of CUDA 13 builds.
CUDA13_MIN_DRIVER = 580

Rule = Callable[[Profile, TargetFacts], list[Finding]]


@dataclass(frozen=True)
class RuleInfo:
    name: str
    reason: str
    source: str
    fn: Rule


RULES: list[RuleInfo] = []


def rule(name: str, *, title: str, reason: str, source: str, fix: str) -> Callable[[Rule], Rule]:
    """Register a rule with the shared check registry and in :data:`RULES`."""

    def wrap(fn: Rule) -> Rule:
        check(name, title=title, group="serve", meaning=reason, fix=fix)(fn)
        RULES.append(RuleInfo(name=name, reason=reason, source=source, fn=fn))
        return fn

    return wrap


def _f(level: Level, name: str, profile: Profile, message: str, cause: str, fix: str) -> Finding:
    return Finding(level=level, check=name, subject=f"profile {profile.name}", message=message, cause=cause, fix=fix)


@rule(
    "serve.rule.gpu-arch",
    title="Profile is made for these GPUs",
    reason="A profile's kernels and backends were chosen for its GPU architectures.",
    source="profile.architectures",
    fix="Pick a profile for this GPU architecture.",
)
def gpu_arch(p: Profile, t: TargetFacts) -> list[Finding]:
    foreign = sorted(set(t.gpu_archs) - set(p.architectures))
    if not t.gpu_archs:
        return [
            _f(
                Level.FAIL,
                "serve.rule.gpu-arch",
                p,
                "no GPUs in the target facts",
                "nothing to serve on",
                "check the host facts",
            )
        ]
    if foreign:
        return [
            _f(
                Level.FAIL,
                "serve.rule.gpu-arch",
                p,
                f"target GPUs {', '.join(foreign)} not in {', '.join(p.architectures)}",
                "the profile was made for other GPUs",
                "pick a matching profile",
            )
        ]
    return []


@rule(
    "serve.rule.gpu-count",
    title="Enough GPUs for the parallel sizes",
    reason="TP x PP ranks must each get a GPU; GLM-5-NVFP4 needs 8x 96 GB at TP8.",
    source="sglang-2026-12 1.3 (NVFP4 433 GB, ~56 GB/GPU at TP8)",
    fix="Use a host with enough GPUs.",
)
def gpu_count(p: Profile, t: TargetFacts) -> list[Finding]:
    flags = by_dest(p)
    pp = int(str(flags.get("pp_size", 1)))
    tp = int(str(flags.get("tp_size", p.tp_size)))
    out: list[Finding] = []
    if tp != p.tp_size:
        out.append(
            _f(
                Level.FAIL,
                "serve.rule.gpu-count",
                p,
                f"--tp-size {tp} in flags but tp_size {p.tp_size}",
                "the profile contradicts itself",
                "set tp_size only",
            )
        )
    nnodes = p.multinode.nnodes if p.multinode else 1
    need = max(p.gpus, -(-tp * pp // nnodes))  # per node: the ranks are split over the nodes
    if len(t.gpu_archs) < need:
        out.append(
            _f(
                Level.FAIL,
                "serve.rule.gpu-count",
                p,
                f"needs {need} GPUs, target has {len(t.gpu_archs)}",
                "ranks without a GPU cannot start",
                "use a host with more GPUs or another profile",
            )
        )
    return out


@rule(
    "serve.rule.allreduce-fusion-sm120",
    title="No FlashInfer allreduce fusion on SM120",
    reason="The TRT-LLM allreduce-fusion kernels are built for SM90/SM10x only; SM120 fails at JIT or init, and "
    "a patched build ran at 236 tok/s instead of ~3,740.",
    source="sglang#15650; sglang-2026-12 1.2 (flashinfer_comm_fusion.py); seeds 000",
    fix="Drop --enable-flashinfer-allreduce-fusion / --flashinfer-allreduce-fusion-backend.",
)
def allreduce_fusion(p: Profile, t: TargetFacts) -> list[Finding]:
    flags = by_dest(p)
    on = flags.get("enable_flashinfer_allreduce_fusion") is True or "flashinfer_allreduce_fusion_backend" in flags
    if on and is_sm12x(t):
        return [
            _f(
                Level.FAIL,
                "serve.rule.allreduce-fusion-sm120",
                p,
                "FlashInfer allreduce fusion on SM120",
                "'No supported CUDA architectures found for major versions [9, 10]' (<=0.5.9) or 'FlashInfer "
                "allreduce fusion requires SM90 or SM10X NVIDIA GPUs.' (0.5.23)",
                "remove the allreduce-fusion flags",
            )
        ]
    return []


_TRTLLM_MOE = {"flashinfer_trtllm", "flashinfer_trtllm_routed", "experimental_sgl_trtllm"}


@rule(
    "serve.rule.trtllm-moe-sm120",
    title="No trtllm-gen MoE / FP4 GEMM kernels on SM120",
    reason="trtllm-gen MoE and FP4 GEMM kernels are SM100-only (SGLang itself picks flashinfer_cutlass on SM120).",
    source="sglang-2026-12 1.2 and 1.3 (glm-5-deployment.jsx NVFP4 B200 recipe); probe-and-sglang (ii)",
    fix="Use --moe-runner-backend flashinfer_cutlass and --fp4-gemm-backend flashinfer_cutlass.",
)
def trtllm_moe(p: Profile, t: TargetFacts) -> list[Finding]:
    flags = by_dest(p)
    out: list[Finding] = []
    if not is_sm12x(t):
        return out
    if str(flags.get("moe_runner_backend", "")) in _TRTLLM_MOE:
        out.append(
            _f(
                Level.FAIL,
                "serve.rule.trtllm-moe-sm120",
                p,
                f"--moe-runner-backend {flags['moe_runner_backend']} on SM120",
                "trtllm-gen MoE kernels are SM100-only",
                "use flashinfer_cutlass",
            )
        )
    fp4 = flags.get("fp4_gemm_runner_backend", flags.get("fp4_gemm_backend", ""))  # dest differs by version
    if str(fp4) == "flashinfer_trtllm":
        out.append(
            _f(
                Level.FAIL,
                "serve.rule.trtllm-moe-sm120",
                p,
                "--fp4-gemm-backend flashinfer_trtllm on SM120",
                "trtllm-gen FP4 GEMM kernels are SM100-only",
                "use flashinfer_cutlass",
            )
        )
    return out


_SM120_FP8_DSA_OK = {"prefill": {"flashinfer_sparse_mla", "triton_sparse_mla"}, "decode": {"flashinfer_sparse_mla"}}


@rule(
    "serve.rule.dsa-backend-sm120",
    title="DSA/NSA attention backends that run on SM120",
    reason="On SM120 with FP8 KV, SGLang >=0.5.17 accepts only flashinfer_sparse_mla (and triton_sparse_mla for "
    "prefill, >=0.5.22); trtllm/flashmla kernels are SM90/SM100-only.",
    source="sglang-2026-12 1.2 (kernels/ops/attention/flash_mla_sm120.py); seeds 004 (trtllm NSA, Feb 2026 build)",
    fix="Leave --dsa-*-backend unset or set flashinfer_sparse_mla.",
)
def dsa_backend(p: Profile, t: TargetFacts) -> list[Finding]:
    if not (is_dsa(p) and is_sm12x(t)):
        return []
    flags = by_dest(p)
    kv = kv_dtype(p, t)
    out: list[Finding] = []
    for phase in ("prefill", "decode"):
        value = flags.get(f"dsa_{phase}_backend")
        if value is None:
            continue
        value = str(value)
        ok = set(_SM120_FP8_DSA_OK[phase])
        if phase == "prefill" and not at_least(p.pins.sglang, "0.5.22"):
            ok.discard("triton_sparse_mla")
        if at_least(p.pins.sglang, "0.5.17") and is_fp8(kv) and value not in ok:
            out.append(
                _f(
                    Level.FAIL,
                    "serve.rule.dsa-backend-sm120",
                    p,
                    f"--dsa-{phase}-backend {value} with FP8 KV on SM120",
                    "SGLang refuses it at start-up: 'GLM DSA with FP8 KV cache on NVIDIA SM120/SM121 supports "
                    "only flashinfer_sparse_mla (default) or triton_sparse_mla (prefill)'",
                    f"use {' or '.join(sorted(ok))}",
                )
            )
        elif value == "trtllm" or value.startswith("flashmla"):
            out.append(
                _f(
                    Level.WARN,
                    "serve.rule.dsa-backend-sm120",
                    p,
                    f"{phase} DSA/NSA backend {value} on SM120",
                    "its kernels target SM90/SM100 ('Unsupported architecture' reports); the Feb 2026 seeds ran "
                    "trtllm NSA on a patched main-branch build",
                    "prefer SGLang >= 0.5.17 with flashinfer_sparse_mla",
                )
            )
    return out


@rule(
    "serve.rule.dsa-kv-dtype-sm120",
    title="GLM DSA on SM120 needs the fp8_e4m3 KV cache",
    reason="SGLang >=0.5.17 picks the only DSA backend that runs on SM120 (flashinfer_sparse_mla) for GLM DSA when "
    "the KV cache is fp8_e4m3 and nothing else (arg_groups/overrides.py:637-675); BF16 (or fp8_e5m2) falls "
    "through to flashmla_sparse/trtllm, SM90/SM100 kernels, and naming flashinfer_sparse_mla then raises "
    "'flashinfer_sparse_mla supports only GLM DSA with FP8 KV cache on NVIDIA SM120/SM121'.",
    source="sglang 0.5.23 arg_groups/overrides.py:601-675 (_dsa_split_backend_resolution), "
    "kernels/ops/attention/flash_mla_sm120.py:690-700",
    fix="Set --kv-cache-dtype fp8_e4m3 (or leave it auto, which resolves to it on SM120).",
)
def dsa_kv_dtype(p: Profile, t: TargetFacts) -> list[Finding]:
    if p.model_type != "glm_moe_dsa" or not is_sm12x(t) or not at_least(p.pins.sglang, "0.5.17"):
        return []
    kv = kv_dtype(p, t)
    if kv == "fp8_e4m3":
        return []
    return [
        _f(
            Level.FAIL,
            "serve.rule.dsa-kv-dtype-sm120",
            p,
            f"--kv-cache-dtype {kv} with GLM DSA on SM120",
            "SGLang resolves the DSA backends to flashmla_sparse/trtllm, which do not run on SM120, or refuses "
            "flashinfer_sparse_mla without fp8_e4m3 KV",
            "use --kv-cache-dtype fp8_e4m3 (or auto)",
        )
    ]


@rule(
    "serve.rule.fp8-kv-backend",
    title="FP8 KV cache only with a backend that supports it",
    reason="On DSA models FP8 KV needs the DSA path: dense triton asserts on FP8 NSA KV, flashinfer MLA + FP8 KV "
    "crashes ('page_table_1_flattened'); flashinfer_sparse_mla needs FP8 KV.",
    source="seeds 004 (triton assertion), seeds 000 and probe-and-sglang (ii) Profile B; sglang-2026-12 1.2",
    fix="With FP8 KV leave --attention-backend unset (dsa); with --attention-backend triton use bf16 KV.",
)
def fp8_kv_backend(p: Profile, t: TargetFacts) -> list[Finding]:
    if not is_dsa(p):
        return []
    flags = by_dest(p)
    kv = kv_dtype(p, t)
    attn = str(flags.get("attention_backend", ""))
    out: list[Finding] = []
    if is_fp8(kv) and attn in ("triton", "flashinfer", "flashmla", "fa3"):
        out.append(
            _f(
                Level.FAIL,
                "serve.rule.fp8-kv-backend",
                p,
                f"KV {kv} with --attention-backend {attn}",
                "dense attention backends do not support the FP8 DSA KV layout (assertion or "
                "'PrefillMetadata' attribute errors under load)",
                "drop --attention-backend or use bf16 KV",
            )
        )
    uses_sparse_mla = any(
        str(flags.get(f"dsa_{ph}_backend", "")) == "flashinfer_sparse_mla" for ph in ("prefill", "decode")
    )
    if uses_sparse_mla and not is_fp8(kv):
        out.append(
            _f(
                Level.FAIL,
                "serve.rule.fp8-kv-backend",
                p,
                f"flashinfer_sparse_mla with KV {kv}",
                "'flashinfer_sparse_mla supports only GLM DSA with FP8 KV cache on NVIDIA SM120/SM121'",
                "set --kv-cache-dtype fp8_e4m3",
            )
        )
    if (
        (flags.get("dsa_prefill_backend") or flags.get("dsa_decode_backend"))
        and "kv_cache_dtype" not in flags
        and at_least(p.pins.sglang, "0.5.15")
    ):
        out.append(
            _f(
                Level.WARN,
                "serve.rule.fp8-kv-backend",
                p,
                "DSA backend set without --kv-cache-dtype",
                "'When specifying --dsa-prefill-backend or --dsa-decode-backend, you should also explicitly "
                "set --kv-cache-dtype'",
                "set --kv-cache-dtype fp8_e4m3",
            )
        )
    return out


@rule(
    "serve.rule.sglang-glm5-sm120",
    title="SGLang new enough for GLM-5 DSA on SM120",
    reason="Released SGLang has an SM120 DSA path for glm_moe_dsa from 0.5.17 (flashinfer_sparse_mla + DeepGEMM "
    "SM120 paged-MQA kernels of sgl-deep-gemm 0.1.5.post1); 0.5.15 fails in DSA metadata.",
    source="sglang-2026-12 0 item 3 and 1.1; sglang#26928; seeds 004 (0.5.8.post1 lacked SM120 fixes)",
    fix="Pin SGLang >= 0.5.17 (0.5.23 current).",
)
def sglang_glm5_sm120(p: Profile, t: TargetFacts) -> list[Finding]:
    if not (is_dsa(p) and is_sm12x(t)) or at_least(p.pins.sglang, "0.5.17"):
        return []
    dense = str(by_dest(p).get("attention_backend", "")) == "triton"
    level = Level.WARN if dense else Level.FAIL
    why = "no released SM120 DSA path before 0.5.17" + (" (dense triton MLA fallback: slow prefill)" if dense else "")
    return [
        _f(
            level,
            "serve.rule.sglang-glm5-sm120",
            p,
            f"SGLang {p.pins.sglang} < 0.5.17 for {p.model_type} on SM120",
            why,
            "pin SGLang >= 0.5.17",
        )
    ]


@rule(
    "serve.rule.transformers-model-type",
    title="Transformers knows the model_type",
    reason="Transformers older than the model's model_type fails at config load: KeyError: 'glm_moe_dsa'.",
    source="seeds 004 (Transformers 4.57.1 → 5.2.0); sglang#19408; zai-org/GLM-5#22",
    fix="Pin Transformers at least the version that added the model_type.",
)
def transformers_model_type(p: Profile, t: TargetFacts) -> list[Finding]:
    need = MODEL_TYPE_MIN_TRANSFORMERS.get(p.model_type or "")
    if need and version_key(p.pins.transformers) < version_key(need):
        return [
            _f(
                Level.FAIL,
                "serve.rule.transformers-model-type",
                p,
                f"Transformers {p.pins.transformers} < {need} for model_type {p.model_type}",
                f"'KeyError: {p.model_type!r}' when SGLang reads config.json",
                f"pin transformers >= {need}",
            )
        ]
    return []


@rule(
    "serve.rule.cuda-driver",
    title="Driver branch carries the CUDA build",
    reason="SGLang wheels and images are CUDA 13 only after 0.5.19; CUDA 13 needs an R580+ driver.",
    source="sglang-2026-12 0 item 2 (install.mdx: v0.5.19-cu129 is the last CUDA 12 tag)",
    fix="Install an R580+ driver on host and guest, or pin an older CUDA 12 release.",
)
def cuda_driver(p: Profile, t: TargetFacts) -> list[Finding]:
    out: list[Finding] = []
    if p.pins.cuda < 13 and at_least(p.pins.sglang, "0.5.20"):
        out.append(
            _f(
                Level.FAIL,
                "serve.rule.cuda-driver",
                p,
                f"CUDA {p.pins.cuda} with SGLang {p.pins.sglang}",
                "CUDA 12 builds ended at 0.5.19",
                "set pins.cuda: 13",
            )
        )
    major = t.driver_major
    if p.pins.cuda >= 13:
        if major is None:
            out.append(
                _f(
                    Level.INFO,
                    "serve.rule.cuda-driver",
                    p,
                    "driver version unknown; CUDA 13 needs R580+",
                    "no driver fact given",
                    "read the host facts",
                )
            )
        elif major < CUDA13_MIN_DRIVER:
            out.append(
                _f(
                    Level.FAIL,
                    "serve.rule.cuda-driver",
                    p,
                    f"CUDA {p.pins.cuda} build on driver {t.driver_version} (< R{CUDA13_MIN_DRIVER})",
                    "CUDA fails to initialise (error 803/804: unsupported display driver / cuda driver combination)",
                    f"install an R{CUDA13_MIN_DRIVER}+ driver",
                )
            )
    return out


@rule(
    "serve.rule.shared-experts-fusion",
    title="Shared-expert fusion off where the version needs it",
    reason="SGLang 0.5.15-0.5.18 fuses NVIDIA GLM-5.x NVFP4 shared experts kept in BF16 and fails to load "
    "('The size of tensor a (3072) must match the size of tensor b (6144)'); auto-off from 0.5.19.",
    source="sglang-2026-12 1.2; InferenceX#2335; sglang#29562",
    fix="Add --disable-shared-experts-fusion.",
)
def shared_experts(p: Profile, t: TargetFacts) -> list[Finding]:
    flags = by_dest(p)
    nvfp4 = str(flags.get("quantization", "")) == "modelopt_fp4"
    if (
        is_dsa(p)
        and nvfp4
        and at_least(p.pins.sglang, "0.5.15")
        and not at_least(p.pins.sglang, "0.5.19")
        and flags.get("disable_shared_experts_fusion") is not True
    ):
        return [
            _f(
                Level.FAIL,
                "serve.rule.shared-experts-fusion",
                p,
                "shared-expert fusion left on",
                "weight load fails with a 3072 vs 6144 size mismatch",
                "add --disable-shared-experts-fusion",
            )
        ]
    return []


_STALE_ENV = {
    "SGLANG_ENABLE_SPEC_V2": ("0.5.15", "removed in 0.5.15: speculative decoding always runs the V2 worker"),
    "SGLANG_ENABLE_JIT_DEEPGEMM": ("0.5.17", "the DSA indexer uses DeepGEMM regardless; =0 risks NameErrors"),
}


@rule(
    "serve.rule.stale-env",
    title="No stale SGLang environment switches",
    reason="Some SGLang_* switches were removed or became harmful in later versions.",
    source="sglang-2026-12 7 items 1-2",
    fix="Drop the variable.",
)
def stale_env(p: Profile, t: TargetFacts) -> list[Finding]:
    out: list[Finding] = []
    for var, (since, why) in _STALE_ENV.items():
        if var in p.env and at_least(p.pins.sglang, since):
            out.append(
                _f(Level.WARN, "serve.rule.stale-env", p, f"{var} set for SGLang {p.pins.sglang}", why, f"remove {var}")
            )
    return out


def run_rules(p: Profile, t: TargetFacts) -> list[Finding]:
    out: list[Finding] = []
    for info in RULES:
        out.extend(info.fn(p, t))
    return out


__all__ = ["RULES", "RuleInfo", "run_rules", "sm_major"]
