"""``gpuhost tune sglang``: search the launch settings of a running server, keep the fastest that answers right."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from gpuhost.cli.output import error
from gpuhost.cli.root import app

tune_app = typer.Typer(help="Search a server's launch settings for the fastest that still answers right.")
app.add_typer(tune_app, name="tune")


def _concurrency(value: str) -> str:
    from gpuhost.bench_serving.sweep import parse_concurrency

    try:
        parse_concurrency(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    return value


@tune_app.command("sglang")
def tune_sglang(
    inventory: Path = typer.Option(..., "-i", "--inventory", help="Inventory file (YAML).", envvar="GPUHOST_INVENTORY"),
    limit: str | None = typer.Option(None, "--limit", "-l", help="The node (or group) of the server."),
    ctid: int | None = typer.Option(None, "--ctid", help="The container of the server (when there are several)."),
    concurrency: str = typer.Option(
        ..., "--concurrency", callback=_concurrency, help="Bench levels each variant is measured at, e.g. 256,1024."
    ),
    budget: int = typer.Option(
        6, "--budget", min=1, max=32, help="Variants launched at most (the running one counts)."
    ),
    check: bool = typer.Option(False, "--check", help="List the variants and their estimated time; launch nothing."),
    resume: bool = typer.Option(False, "--resume", help="Continue this server's last unfinished tune run."),
    allow_restart: bool = typer.Option(
        False, "--allow-restart", help="Required: every variant restarts the server (and the end restarts it again)."
    ),
    name: str | None = typer.Option(None, "--name", help="Name of the profile written (default: <running>-tuned)."),
    profile_dir: Path | None = typer.Option(
        None, "--profile-dir", help="Where the profile is written (default: sglang_profile_dirs' first directory)."
    ),
    input_len: int = typer.Option(1024, "--input-len", min=1, help="Input tokens per request."),
    output_len: int = typer.Option(1024, "--output-len", min=1, help="Output tokens per request."),
    prompts: int | None = typer.Option(
        None, "--prompts-per-level", min=1, help="Requests per level (default: 3 x concurrency, at least 8)."
    ),
    warmup: int = typer.Option(2, "--warmup-requests", min=0, help="Warm-up requests before each level."),
    interval_ms: int = typer.Option(500, "--sample-interval-ms", min=50, max=500, help="GPU sampling period."),
    restart_s: float = typer.Option(
        900.0, "--restart-estimate-s", min=0, help="For --check: seconds one restart takes (load, graphs, autotune)."
    ),
    tpot_ms: float = typer.Option(
        30.0, "--tpot-estimate-ms", min=0.1, help="For --check: milliseconds per output token of one request."
    ),
    out: Path = typer.Option(Path("gpuhost-tune"), "--out", help="Where tune run directories are made."),
) -> None:
    """Measure the running profile, then one setting at a time (admission bound, CUDA graphs and their bound,
    radix cache, MoE autotune, MoE runner, attention backend; known-good values first) from the best so far:
    each variant validated (a refused one is never launched), launched (restarting the server), proven by the
    canary (a wrong one never wins), and benched with the GPUs' power sampled. The best is written as a profile
    and left serving; after a failed variant the previous profile is launched again at once.

    Exit 0 done (or --check), 1 the run failed (the previous profile serves again), 2 bad input (nothing changed).
    """
    from gpuhost.bench_serving.sweep import SweepPlan, parse_concurrency

    levels = parse_concurrency(concurrency)
    plan = SweepPlan(
        concurrencies=levels,
        input_len=input_len,
        output_len=output_len,
        prompts_per_level=prompts,
        warmup_requests=warmup,
        dataset="random-ids",
        tokenizer=None,
        sample_interval_ms=interval_ms,
    )
    try:
        plan.check()
    except ValueError as exc:
        error(str(exc))
        raise typer.Exit(2) from None
    from gpuhost.cli import tune_run

    ctx = tune_run.open_target(inventory, limit, ctid)
    if check:
        typer.echo(tune_run.check_listing(ctx, plan, budget, restart_s, tpot_ms), nl=False)
        raise typer.Exit(0)
    if not allow_restart:
        error("gpuhost tune restarts the server for every variant: give --allow-restart")
        raise typer.Exit(2)
    target_dir = tune_run.profile_dir_of(ctx, profile_dir)
    code = tune_run.run(
        ctx,
        plan,
        budget=budget,
        resume=resume,
        name=name or f"{ctx.base.name}-tuned",
        profile_dir=target_dir,
        out=out,
        echo=_echo,
    )
    raise typer.Exit(code)


def _echo(message: Any, **kw: Any) -> None:
    typer.echo(message, **kw)
