"""The variants ``gpuhost tune sglang`` may try: one setting at a time changed from the running profile.

Each axis is one launch setting the seed story changed (seed 000: the admission bound 64 -> 1,024, CUDA graphs off,
the radix cache off, the MoE runner autotuned) or one whose alternatives the rules name (the MoE runner, the DSA
prefill backend on SM120). An axis lists its candidate values known-good first; the search (``tune.search``) walks
the axes in this order and keeps a value only when it measures faster. A variant the validator refuses is listed
and never launched.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from gpuhost.checks import Finding, Level
from gpuhost.serve.facts import TargetFacts
from gpuhost.serve.profile import FlagValue, Profile
from gpuhost.serve.validate import refused, validate

#: a change to the profile's flags: a value sets the flag, None removes it
Changes = tuple[tuple[str, FlagValue | None], ...]

#: seed 000's admission bound (880 -> 3,740 tok/s) and sglang#29580's decode capture bound for 96 GB cards
SEED_ADMISSION = 1024
SEED_CAPTURE = 256
MOE_RUNNERS = ("flashinfer_cutlass", "triton", "flashinfer_trtllm")
DSA_PREFILL = ("flashinfer_sparse_mla", "triton_sparse_mla")


@dataclass(frozen=True)
class Variant:
    axis: str
    changes: Changes

    @property
    def label(self) -> str:
        if not self.changes:
            return "(the running profile)"
        return ", ".join(_one(flag, value) for flag, value in self.changes)

    @property
    def key(self) -> str:
        return ";".join(f"{f}={v!r}" for f, v in sorted(self.changes, key=lambda c: c[0])) or "base"


def _one(flag: str, value: FlagValue | None) -> str:
    if value is None:
        return f"no {flag}"
    if value is True:
        return flag
    return f"{flag} {value}"


def merged(current: Changes, extra: Changes) -> Changes:
    out = dict(current)
    out.update(dict(extra))
    return tuple(sorted(out.items(), key=lambda c: c[0]))


def _toggle(flags: dict[str, FlagValue], flag: str) -> Changes:
    return ((flag, None),) if flags.get(flag) else ((flag, True),)


def axes(base: Profile, concurrency: tuple[int, ...]) -> list[tuple[str, list[Changes]]]:
    """Per axis, its candidate changes from ``base`` (known-good first, the base's own value left out)."""
    f = base.flags
    top = max(concurrency)
    out: list[tuple[str, list[Changes]]] = []
    # a bound only ever rises: the seeds' 1,024, and the top level when it is higher still
    admission = [
        v for v in dict.fromkeys([SEED_ADMISSION, max(top, SEED_ADMISSION)]) if v > _int(f, "--max-running-requests")
    ]
    out.append(("admission", [(("--max-running-requests", v),) for v in admission]))
    graphs: list[Changes] = []
    disabled = f.get("--cuda-graph-backend-decode") == "disabled"
    if not disabled:
        graphs.append((("--cuda-graph-backend-decode", "disabled"), ("--cuda-graph-max-bs-decode", None)))
    on = (("--cuda-graph-backend-decode", None),) if "--cuda-graph-backend-decode" in f else ()
    for bound in dict.fromkeys([SEED_CAPTURE, top]):
        if disabled or bound > _int(f, "--cuda-graph-max-bs-decode"):
            graphs.append((*on, ("--cuda-graph-max-bs-decode", bound)))
    out.append(("cuda graphs", graphs))
    out.append(("radix cache", [_toggle(f, "--disable-radix-cache")]))
    out.append(("moe autotune", [_toggle(f, "--disable-flashinfer-autotune")]))
    runner = f.get("--moe-runner-backend")
    out.append(("moe runner", [(("--moe-runner-backend", r),) for r in MOE_RUNNERS if r != runner]))
    if "--dsa-prefill-backend" in f:
        prefill = f.get("--dsa-prefill-backend")
        out.append(("attention", [(("--dsa-prefill-backend", b),) for b in DSA_PREFILL if b != prefill]))
    return [(name, cands) for name, cands in out if cands]


def _int(flags: dict[str, FlagValue], flag: str) -> int:
    """A numeric flag's value, 0 when unset (or not a number)."""
    value = flags.get(flag)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def variant_name(base: str, variant: Variant) -> str:
    if not variant.changes:
        return base
    return f"{base}-t{hashlib.sha256(variant.key.encode()).hexdigest()[:7]}"


def apply(base: Profile, variant: Variant, name: str) -> Profile:
    """``base`` with the variant's changes, as a profile of its own name (a fallback link is dropped)."""
    flags = dict(base.flags)
    for flag, value in variant.changes:
        if value is None:
            flags.pop(flag, None)
        else:
            flags[flag] = value
    note = f"gpuhost tune variant of {base.name}: {variant.label}"
    return base.model_copy(
        update={"name": name, "flags": flags, "status": "current", "fallback_of": None, "notes": [*base.notes, note]}
    )


def refusal(profile: Profile) -> list[Finding]:
    """The validator on the profile's own GPUs (as ``gpuhost launch`` checks it first); FAIL findings, or []."""
    archs = [profile.architectures[0]] * profile.gpus if profile.architectures else []
    facts = TargetFacts(gpu_archs=archs, driver_version=None)
    findings = validate(profile, facts)
    return [f for f in findings if f.level >= Level.FAIL] if refused(findings) else []
