"""The steps ``gpuhost tune sglang`` hands the search (:mod:`gpuhost.bench_serving.tune`): the launch playbook
``gpuhost launch sglang`` runs (``--allow-restart``, one container, the variant as ``--profile``), the bench sweep
of ``gpuhost bench sglang``, and the run directory (``state.json``, the variants file, the report)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuhost.errors import ConfigError, GpuhostError, UsageError
from gpuhost.serve.profile import Profile

Echo = Callable[..., None]
VARIANTS_FILE = "variants.yml"
STATE_FILE = "state.json"


@dataclass
class TuneTarget:
    inventory_path: Path
    inventory: Any
    node: str
    ctid: int
    subject: str
    profile_dirs: list[str]
    base: Profile


def open_target(inventory_path: Path, limit: str | None, ctid: int | None) -> TuneTarget:
    """The one server to tune and the profile it runs now (read from what ``gpuhost launch`` left there)."""
    from gpuhost.bench_serving.sweep import read_launched
    from gpuhost.connection.shipped_tool import target_of
    from gpuhost.inventory.loader import load_inventory
    from gpuhost.runner.connect import open_connection
    from gpuhost.serve.profile import get_profile
    from gpuhost.serve.service import targets

    inv = load_inventory(inventory_path)
    found = targets(inv, limit=limit, ctids=[ctid] if ctid is not None else None)
    if len(found) > 1:
        raise UsageError(
            "more than one server: " + ", ".join(t.subject for t in found) + "; pick one with --limit and/or --ctid"
        )
    t = found[0]
    if t.ctid is None:
        raise UsageError(f"{t.subject}: gpuhost tune tunes a server in a container (give --ctid)")
    with open_connection(inv.nodes[t.node]) as conn:
        launched = read_launched(target_of(conn, t.ctid))
    dirs = [str(d) for d in inv.vars.get("sglang_profile_dirs") or []]
    base = get_profile(str(launched["profile"]), [Path(d) for d in dirs])
    return TuneTarget(inventory_path, inv, t.node, t.ctid, t.subject, dirs, base)


def profile_dir_of(ctx: TuneTarget, given: Path | None) -> Path:
    if given is not None:
        return given
    for d in ctx.profile_dirs:
        if Path(d).is_dir():
            return Path(d)
    raise UsageError(
        "no directory among the inventory's sglang_profile_dirs to write the tuned profile to: "
        "add one, or give --profile-dir DIR"
    )


def check_listing(ctx: TuneTarget, plan: Any, budget: int, restart_s: float, tpot_ms: float) -> str:
    """``--check``: each variant in the order tried, refused ones marked, and the time it would take."""
    from gpuhost.bench_serving.tune import planned

    bench_s = sum(
        (max(8, 3 * c) if plan.prompts_per_level is None else plan.prompts_per_level) / c * plan.output_len
        for c in plan.concurrencies
    ) * (tpot_ms / 1000)
    per = restart_s + bench_s
    lines = [
        f"{ctx.subject}: tune from {ctx.base.name} at concurrency {','.join(map(str, plan.concurrencies))}, "
        f"at most {budget} launched",
        "",
    ]
    launched = 0
    for v, prof, why in planned(ctx.base, plan.concurrencies, budget):
        if why:
            lines.append(f"  refused   {prof.name:<28} {v.axis:<13} {v.label}: {why[0]}")
            continue
        launched += 1
        lines.append(f"  {launched:>2}. ~{per / 60:4.0f} min {prof.name:<28} {v.axis:<13} {v.label}")
    total = launched * per + restart_s
    lines += [
        "",
        f"estimated: {launched} launches x ({restart_s:.0f} s restart + {bench_s:.0f} s bench) + a final restart "
        f"= {total / 60:.0f} min (upper bound: a kept value changes later variants, never their number)",
        "nothing launched (--check)",
    ]
    return "\n".join(lines) + "\n"


def _latest_unfinished(out: Path, node: str, ctid: int) -> Path | None:
    if not out.is_dir():
        return None
    for d in sorted((p for p in out.iterdir() if p.name.endswith(f"-{node}-ct{ctid}")), reverse=True):
        state = d / STATE_FILE
        try:
            finished = json.loads(state.read_text(encoding="utf-8")).get("finished") if state.is_file() else True
        except (OSError, ValueError, AttributeError):
            raise ConfigError("not a tune state file (JSON)", file=str(state)) from None
        if not finished:
            return d
    return None


def run(
    ctx: TuneTarget,
    plan: Any,
    *,
    budget: int,
    resume: bool,
    name: str,
    profile_dir: Path,
    out: Path,
    echo: Echo,
) -> int:
    from gpuhost.bench_serving import tune
    from gpuhost.bench_serving.sweep import default_run_dir

    plan_doc = {
        "target": ctx.subject,
        "base": ctx.base.name,
        "concurrency": list(plan.concurrencies),
        "input_len": plan.input_len,
        "output_len": plan.output_len,
        "budget": budget,
    }
    run_dir = _latest_unfinished(out, ctx.node, ctx.ctid) if resume else None
    if resume and run_dir is None:
        raise UsageError(f"--resume: no unfinished tune run of {ctx.subject} under {out}")
    if run_dir is not None:
        state = tune.TuneState.load(run_dir / STATE_FILE)
        if state.plan.get("concurrency") != plan_doc["concurrency"] or state.plan.get("base") != plan_doc["base"]:
            raise UsageError(
                f"--resume: {run_dir} tuned {state.plan.get('base')} at {state.plan.get('concurrency')}; "
                "run with the same profile and --concurrency, or without --resume"
            )
        echo(f"resuming {run_dir}: {len(state.measured)} variants measured before", err=True)
    else:
        run_dir = default_run_dir(out, ctx.node, ctx.ctid)
        run_dir.mkdir(parents=True, exist_ok=True)
        state = tune.TuneState(run_dir / STATE_FILE, plan_doc)
        state.save()
    variants_file = run_dir / VARIANTS_FILE
    variants: dict[str, Profile] = {}
    if variants_file.exists():  # a resumed run: the variants launched before stay listed
        from gpuhost.serve.profile import load_profiles

        variants = load_profiles([variants_file], shipped=False)

    def launch(profile: Profile) -> tuple[str, str]:
        if profile.name != ctx.base.name:
            variants[profile.name] = profile
            tune.write_profile_file(variants_file, list(variants.values()))
        return _launch(ctx, profile.name, [*ctx.profile_dirs, str(variants_file)] if variants else ctx.profile_dirs)

    def bench(profile: Profile) -> tuple[float, float | None, str]:
        return _bench(ctx, plan, run_dir / "bench" / profile.name, lambda m: echo(f"  {m}", err=True))

    def restore() -> tuple[str, str]:
        return _launch(ctx, ctx.base.name, ctx.profile_dirs)

    steps = tune.Steps(launch=launch, bench=bench, restore=restore, progress=lambda m: echo(m, err=True))
    try:
        outcome = tune.search(ctx.base, plan.concurrencies, budget, state, steps)
    except (KeyboardInterrupt, GpuhostError, tune.BaseFailed, tune.RestoreFailed) as exc:
        reason = "interrupted" if isinstance(exc, KeyboardInterrupt) else str(exc)
        echo(f"tune stopped: {reason}", err=True)
        if not isinstance(exc, tune.RestoreFailed):
            echo(f"launching the previous profile {ctx.base.name} again", err=True)
            status, detail = restore()
            echo(
                f"{ctx.base.name} serves again" if status == "ok" else f"the previous profile failed too: {detail}",
                err=True,
            )
        echo(f"state kept in {state.path}: `--resume` goes on from there", err=True)
        return 1
    return _finish(ctx, plan, outcome, state, run_dir, name, profile_dir, echo)


def _finish(
    ctx: TuneTarget,
    plan: Any,
    outcome: Any,
    state: Any,
    run_dir: Path,
    name: str,
    profile_dir: Path,
    echo: Echo,
) -> int:
    from gpuhost.bench_serving import tune
    from gpuhost.bench_serving.tune_plot import plot_tune

    best = outcome.best
    if best.key == "base":
        echo(f"no variant beat {ctx.base.name}: it stays; no profile written", err=True)
        status, detail = _launch(ctx, ctx.base.name, ctx.profile_dirs)
        final, profile_path = ctx.base.name, None
    else:
        winner = tune.winner_profile(outcome, name, plan.concurrencies)
        profile_path = profile_dir / f"{name}.yml"
        tune.write_profile_file(profile_path, [winner])
        dirs = ctx.profile_dirs if str(profile_dir) in ctx.profile_dirs else [*ctx.profile_dirs, str(profile_dir)]
        echo(f"launching the winner {name} ({best.label})", err=True)
        status, detail = _launch(ctx, name, dirs)
        final = name
    if status != "ok":
        echo(f"the winner {final} failed ({detail}); launching {ctx.base.name} again", err=True)
        _launch(ctx, ctx.base.name, ctx.profile_dirs)
        return 1
    state.finished = True
    state.save()
    table = tune.render_table(outcome.tried, best)
    (run_dir / "table.txt").write_text(table, encoding="utf-8")
    report = {
        "schema": tune.SCHEMA,
        "plan": state.plan,
        "winner": best.name if best.key != "base" else None,
        "profile": final,
        "profile_file": str(profile_path) if profile_path else None,
        "tried": [m.__dict__ for m in outcome.tried],
    }
    (run_dir / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    plot = plot_tune(outcome.tried, best, run_dir / "tune.png", _power_limit(outcome.tried))
    echo(table, nl=False)
    echo("")
    if profile_path is not None:
        echo(f"winner: {best.label} -> profile {name} in {profile_path}")
        echo(f"serving {name} now; put `profile: {name}` in the serve: entry of CT {ctx.ctid} to keep it")
        if str(profile_dir) not in ctx.profile_dirs:
            echo(f"  (and add {profile_dir} to sglang_profile_dirs)")
    else:
        echo(f"serving {ctx.base.name} (unchanged)")
    echo(f"run directory: {run_dir}")
    for label, path in (("table", run_dir / "table.txt"), ("report", run_dir / "report.json"), ("plot", plot)):
        echo(f"  {label:<7}{path}")
    return 0


def _power_limit(tried: list[Any]) -> float | None:
    for m in tried:
        if m.bench_dir:
            try:
                doc = json.loads((Path(m.bench_dir) / "result.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            limits = [g.get("power_limit_w") for lv in doc.get("levels", []) for g in lv.get("gpus", [])]
            found = [float(x) for x in limits if isinstance(x, (int, float))]
            if found:
                return max(found)
    return None


def _launch(ctx: TuneTarget, profile: str, dirs: list[str]) -> tuple[str, str]:
    """The launch playbook for one container with ``--allow-restart`` and ``--profile``: (status, detail)."""
    from gpuhost.inventory.loader import load_inventory
    from gpuhost.playbook.loader import load_playbook
    from gpuhost.playbook.variables import Origin
    from gpuhost.redact import redact
    from gpuhost.resources import builtin_playbooks_dir
    from gpuhost.runner.run import RunOptions, run_playbook

    base = builtin_playbooks_dir()
    if base is None or not (base / "launch-sglang.yml").is_file():
        raise UsageError("gpuhost's built-in playbook launch-sglang.yml is missing from this installation")
    failed: list[str] = []

    def on_result(result: Any) -> None:
        if result.status in ("failed", "unreachable"):
            failed.append(redact(f"{result.task}: {result.error or result.reason}"))

    extra = {"lxc_ctids": [ctx.ctid], "sglang_profile": profile, "sglang_profile_dirs": dirs}
    opts = RunOptions(
        limit=ctx.node,
        allow_restart=True,
        extra_vars=extra,
        extra_origins={k: Origin("gpuhost tune") for k in extra},
        on_result=on_result,
    )
    try:
        report = run_playbook(load_playbook(base / "launch-sglang.yml"), load_inventory(ctx.inventory_path), opts)
    except ConfigError as exc:
        text = redact(str(exc))
        return ("refused" if "refused" in text else "crashed"), text
    if report.exit_code == 0:
        return "ok", ""
    text = "; ".join(failed) or f"exit {report.exit_code}"
    return ("wrong" if "canary" in text else "crashed"), text


def _bench(
    ctx: TuneTarget, plan: Any, bench_dir: Path, progress: Callable[[str], None]
) -> tuple[float, float | None, str]:
    """The sweep of ``gpuhost bench sglang``: mean output tok/s over the levels, mean W per GPU over the levels."""
    from gpuhost.bench_serving.sweep import run_sweep
    from gpuhost.runner.connect import open_connection

    with open_connection(ctx.inventory.nodes[ctx.node]) as conn:
        outcome = run_sweep(conn, plan, bench_dir, ctid=ctx.ctid, subject=ctx.subject, progress=progress)
    doc = outcome.document
    bad = [lv["label"] for lv in doc["levels"] if lv["status"] != "ok"]
    if bad:
        raise BenchFailed(f"{ctx.subject}: bench level(s) {', '.join(bad)} failed; see {outcome.run_dir}")
    tok = [float(lv["figures"]["output_throughput_tok_s"]) for lv in doc["levels"]]
    watts = [g["power_mean_w"] for lv in doc["levels"] for g in lv["gpus"] if g.get("power_mean_w") is not None]
    return sum(tok) / len(tok), (sum(watts) / len(watts) if watts else None), str(outcome.run_dir)


class BenchFailed(GpuhostError):
    """A bench level of a variant failed (the client could not finish)."""
