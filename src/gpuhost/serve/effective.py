"""A profile's flags by destination (aliases and abbreviations folded), and what SGLang resolves ``auto`` to."""

from __future__ import annotations

from gpuhost.serve.facts import TargetFacts
from gpuhost.serve.flagtable import (
    Match,
    available_versions,
    load_table,
    resolve,
    version_key,
)
from gpuhost.serve.profile import FlagValue, Profile

#: GLM/DeepSeek sparse-attention model types (DSA, "NSA" in older SGLang).
DSA_MODEL_TYPES = {"glm_moe_dsa", "deepseek_v32"}

#: Old flag names folded onto the new destination, so the rules read one name.
_RENAMED = {"nsa_prefill_backend": "dsa_prefill_backend", "nsa_decode_backend": "dsa_decode_backend"}


def by_dest(profile: Profile) -> dict[str, FlagValue]:
    """``{dest: value}`` of the profile's flags, through the real table when there is one."""
    table = load_table(profile.pins.sglang) if profile.pins.sglang in available_versions() else None
    out: dict[str, FlagValue] = {}
    for flag, value in profile.flags.items():
        name = flag.split("=", 1)[0]
        dest = name.lstrip("-").replace("-", "_")
        if table is not None:
            res = resolve(table, name)
            if res.match in (Match.EXACT, Match.PREFIX) and res.arg is not None:
                dest = res.arg.dest
        out[_RENAMED.get(dest, dest)] = value
    return out


def at_least(version: str, floor: str) -> bool:
    return version_key(version) >= version_key(floor)


def sm_major(arch: str) -> int:
    """``sm120`` → 12, ``sm90`` → 9, ``sm100`` → 10."""
    digits = arch[2:]
    return int(digits[:-1]) if len(digits) >= 2 else int(digits)


def is_sm12x(facts: TargetFacts) -> bool:
    return any(sm_major(a) == 12 for a in facts.gpu_archs)


def is_dsa(profile: Profile) -> bool:
    return (profile.model_type or "") in DSA_MODEL_TYPES


def kv_dtype(profile: Profile, facts: TargetFacts) -> str:
    """The KV-cache dtype SGLang will use (``auto`` resolved as the pinned version does)."""
    value = str(by_dest(profile).get("kv_cache_dtype", "auto"))
    if value != "auto":
        return value
    if is_dsa(profile) and at_least(profile.pins.sglang, "0.5.17") and any(sm_major(a) >= 10 for a in facts.gpu_archs):
        return "fp8_e4m3"  # _dsa_kv_cache_dtype_default, >= 0.5.17
    return "auto"


def is_fp8(dtype: str) -> bool:
    return dtype.startswith("fp8")
