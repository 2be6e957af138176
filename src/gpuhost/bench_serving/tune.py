"""``gpuhost tune sglang``: a bounded coordinate descent over the launch settings, from the running profile.

1. The running profile is measured first (launched as it is, proven by the canary, benched with power).
2. The axes of :mod:`gpuhost.bench_serving.tune_variants` are walked in order (admission, CUDA graphs, radix cache,
   MoE autotune, MoE runner, attention); each candidate is the best settings so far with that one axis changed.
   A candidate the validator refuses is recorded and never launched; one that does not start, or whose answers
   fail the canary, is recorded as failed (the previous profile is launched again at once, so serving resumes)
   and can never win; a passing one is kept when its mean output tok/s over the levels beats the best by
   :data:`MARGIN`.
3. At most ``budget`` variants are launched (the running profile counts as one).

Launching, proving and benching are the caller's (``cli/tune.py`` hands in :class:`Steps`: the launch playbook
with ``--allow-restart``, and :func:`gpuhost.bench_serving.sweep.run_sweep`); this module decides and records.
Every measured variant is written to the run's ``state.json`` at once, so ``--resume`` measures none twice.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpuhost.bench_serving.tune_variants import Changes, Variant, apply, axes, merged, refusal, variant_name
from gpuhost.serve.profile import Profile

SCHEMA = "gpuhost.tune-sglang/1"
#: a candidate must beat the best by 5 % to be kept (the lab's runs of one profile vary by up to 3 %)
MARGIN = 0.05
DEFAULT_BUDGET = 6


@dataclass
class Measured:
    """One variant's outcome: ok (benched), wrong (canary failed), crashed (did not start), refused (validator)."""

    name: str
    axis: str
    label: str
    key: str
    status: str
    tok_s: float | None = None
    watts: float | None = None
    detail: str = ""
    changes: list[list[Any]] = field(default_factory=list)
    bench_dir: str | None = None
    #: this variant's own step: the one axis changed from the best so far
    step: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.tok_s is not None


@dataclass
class Steps:
    """What the search may do to the target, handed in by the command."""

    #: launch this profile (written to the run's variants file first); returns (status, detail):
    #: ok, refused (exit 2), wrong (the canary failed), crashed (anything else)
    launch: Callable[[Profile], tuple[str, str]]
    #: bench the launched server; returns (mean output tok/s over the levels, mean W per GPU, bench run dir)
    bench: Callable[[Profile], tuple[float, float | None, str]]
    #: launch the profile that ran before the tune again (after a failed variant); returns its status
    restore: Callable[[], tuple[str, str]]
    progress: Callable[[str], None] = lambda _m: None


class TuneState:
    """``state.json`` in the run directory: the plan and every variant measured so far (written atomically)."""

    def __init__(self, path: Path, plan: dict[str, Any]) -> None:
        self.path, self.plan = path, plan
        self.measured: dict[str, Measured] = {}
        self.finished = False

    @classmethod
    def load(cls, path: Path) -> TuneState:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("schema") != SCHEMA:
            raise ValueError(f"{path}: not a {SCHEMA} state file")
        state = cls(path, doc["plan"])
        state.measured = {m["key"]: Measured(**m) for m in doc["measured"]}
        state.finished = bool(doc.get("finished"))
        return state

    def record(self, m: Measured) -> None:
        self.measured[m.key] = m
        self.save()

    def save(self) -> None:
        doc = {
            "schema": SCHEMA,
            "plan": self.plan,
            "finished": self.finished,
            "measured": [asdict(m) for m in self.measured.values()],
        }
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)


@dataclass
class TuneOutcome:
    base: Profile
    best: Measured
    best_profile: Profile
    tried: list[Measured]
    restored: bool = False


def planned(base: Profile, concurrency: tuple[int, ...], budget: int) -> list[tuple[Variant, Profile, list[str]]]:
    """What ``--check`` lists: the running profile, then each axis's candidates from it (the order the search
    tries them; a kept value changes later candidates' other settings, never their number), each with its
    refusal (validator FAIL messages, [] when it would launch). Launchable ones beyond ``budget`` are left out."""
    out: list[tuple[Variant, Profile, list[str]]] = [(Variant("base", ()), base, [])]
    launchable = 1
    for axis, candidates in axes(base, concurrency):
        for changes in candidates:
            v = Variant(axis, changes)
            prof = apply(base, v, variant_name(base.name, v))
            why = [f.message for f in refusal(prof)]
            if not why:
                if launchable >= budget:
                    continue
                launchable += 1
            out.append((v, prof, why))
    return out


def search(base: Profile, concurrency: tuple[int, ...], budget: int, state: TuneState, steps: Steps) -> TuneOutcome:
    """The coordinate descent; measured variants already in ``state`` are taken from it, not launched again."""
    tried: list[Measured] = []
    launched = 0
    restored = False

    def measure(v: Variant, step: str) -> Measured:
        nonlocal launched, restored
        prof = apply(base, v, variant_name(base.name, v))
        if v.key in state.measured:
            m = state.measured[v.key]
            steps.progress(f"{prof.name}: {v.label}: measured before ({m.status}), not launched again")
            if m.status not in ("refused",):
                launched += 1
            return m
        m = Measured(prof.name, v.axis, v.label, v.key, "ok", changes=[list(c) for c in v.changes], step=step)
        why = refusal(prof)
        if why:
            m.status, m.detail = "refused", "; ".join(f.message for f in why)
            steps.progress(f"{prof.name}: {v.label}: refused by the validator ({m.detail}); not launched")
            state.record(m)
            return m
        launched += 1
        steps.progress(f"{prof.name}: {v.label}: launching")
        status, detail = steps.launch(prof)
        if status != "ok":
            m.status, m.detail = status, detail
            brief = detail if len(detail) <= 240 else detail[:237] + "..."
            steps.progress(f"{prof.name}: {status}: {brief}; launching the previous profile again")
            state.record(m)
            restore_status, restore_detail = steps.restore()
            if restore_status != "ok":
                raise RestoreFailed(f"the previous profile did not come back: {restore_detail}")
            restored = True
            return m
        m.tok_s, m.watts, m.bench_dir = steps.bench(prof)
        watts = f", {m.watts:.0f} W per GPU" if m.watts is not None else ""
        steps.progress(f"{prof.name}: canary ok, {m.tok_s:.1f} output tok/s{watts}")
        state.record(m)
        return m

    best_v = Variant("base", ())
    best = measure(best_v, best_v.label)
    tried.append(best)
    if not best.ok:
        raise BaseFailed(f"the running profile {base.name} itself failed ({best.status}: {best.detail})")
    current: Changes = ()
    for axis, candidates in axes(base, concurrency):
        for changes in candidates:
            if launched >= budget:
                break
            v = Variant(axis, merged(current, changes))
            m = measure(v, Variant(axis, changes).label)
            tried.append(m)
            assert best.tok_s is not None
            if m.ok and m.tok_s is not None and m.tok_s > best.tok_s * (1 + MARGIN):
                best, best_v = m, v
        current = best_v.changes
    return TuneOutcome(base, best, apply(base, best_v, variant_name(base.name, best_v)), tried, restored)


class RestoreFailed(Exception):
    """The previous profile could not be launched again after a failed variant."""


class BaseFailed(Exception):
    """The running profile did not pass its own launch or canary: nothing to tune from."""


def winner_profile(outcome: TuneOutcome, name: str, concurrency: tuple[int, ...]) -> Profile:
    """The best variant under the operator's name, with notes saying where it came from."""
    b = outcome.best
    notes = [
        f"gpuhost tune sglang from {outcome.base.name} at concurrency {','.join(map(str, concurrency))}: "
        f"{b.label}; {b.tok_s:.1f} output tok/s" + (f", {b.watts:.0f} W per GPU" if b.watts is not None else "")
    ]
    return outcome.best_profile.model_copy(update={"name": name, "notes": [*outcome.base.notes, *notes]})


def render_table(tried: list[Measured], best: Measured) -> str:
    """One line per variant: name, axis, change, status, tok/s, W; the winner marked."""
    rows = [("", "variant", "axis", "change", "status", "out tok/s", "W/GPU")]
    for m in tried:
        rows.append(
            (
                "*" if m.key == best.key else "",
                m.name,
                m.axis,
                m.label,
                m.status,
                f"{m.tok_s:.1f}" if m.tok_s is not None else "-",
                f"{m.watts:.0f}" if m.watts is not None else "-",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(c.ljust(w) if i < 5 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        for r in rows
    ]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def write_profile_file(path: Path, profiles: list[Profile]) -> None:
    """Write a profile file atomically (an existing one is kept as ``.bak``)."""
    import io

    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    buf = io.StringIO()
    yaml.dump({"profiles": [p.model_dump(mode="json", exclude_none=True) for p in profiles]}, buf)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        import shutil

        shutil.copy2(path, path.with_name(path.name + ".bak"))
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(buf.getvalue(), encoding="utf-8")
    os.replace(tmp, path)
