"""``gpuhost bench sglang``: a concurrency sweep against a launched server, or a saved benchmark output read back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from gpuhost.cli.output import error, print_json
from gpuhost.cli.root import app

bench_app = typer.Typer(help="Benchmark a serving machine and show what its GPUs did meanwhile.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")


def _concurrency(value: str | None) -> str | None:
    if value is None:
        return None
    from gpuhost.bench_serving.sweep import parse_concurrency

    try:
        parse_concurrency(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    return value


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether the operator gave ``name`` on the command line (not from GPUHOST_* or gpuhost.toml)."""
    source = ctx.get_parameter_source(name)
    return ctx.params.get(name) is not None and getattr(source, "name", None) == "COMMANDLINE"


@bench_app.command("sglang")
def sglang_command(
    ctx: typer.Context,
    parse: Path | None = typer.Option(
        None,
        "--parse",
        help="Read a saved bench_serving output: the printed "
        "'Serving Benchmark Result' block(s) or the --output-file JSONL (no sweep).",
    ),
    gpu_samples: Path | None = typer.Option(
        None,
        "--gpu-samples",
        help="With --parse: what the GPUs did during that run, a saved 'nvidia-smi dmon' capture (or the bench "
        "sampler's samples.jsonl); shown per GPU with the result.",
    ),
    inventory: Path | None = typer.Option(
        None,
        "-i",
        "--inventory",
        help="Inventory file (YAML): run the sweep.",
        envvar="GPUHOST_INVENTORY",
        metavar="FILE",
    ),
    limit: str | None = typer.Option(None, "--limit", "-l", help="The node (or group) of the server."),
    ctid: int | None = typer.Option(None, "--ctid", help="The container of the server (when there are several)."),
    concurrency: str | None = typer.Option(
        None,
        "--concurrency",
        callback=_concurrency,
        help="Levels, a comma list of positive integers (e.g. 1,64,256,512,1024).",
    ),
    input_len: int = typer.Option(1024, "--input-len", min=1, help="Input tokens per request."),
    output_len: int = typer.Option(1024, "--output-len", min=1, help="Output tokens per request."),
    prompts: int | None = typer.Option(
        None, "--prompts-per-level", min=1, help="Requests per level (default: 3 x concurrency, at least 8)."
    ),
    warmup: int = typer.Option(2, "--warmup-requests", min=0, help="Warm-up requests before each level."),
    dataset: str = typer.Option(
        "random-ids", "--dataset", help="random-ids (offline, token ids) or a local ShareGPT-format JSON file."
    ),
    tokenizer: str | None = typer.Option(
        None, "--tokenizer", help="Tokenizer path on the target (default: the launched checkpoint)."
    ),
    interval_ms: int = typer.Option(
        500, "--sample-interval-ms", min=50, max=500, help="GPU sampling period (500 ms = 2 Hz)."
    ),
    level_timeout: float = typer.Option(3600.0, "--level-timeout", min=10, help="Seconds one level may take."),
    baseline: Path | None = typer.Option(
        None, "--baseline", help="An earlier run's result.json: each figure's change and a regression verdict."
    ),
    out: Path = typer.Option(Path("gpuhost-bench"), "--out", help="Where run directories are made."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (schema gpuhost.bench-sglang/1)."),
    plot: Path | None = typer.Option(
        None, "--plot", help="Also draw throughput, latency and GPU power per level as this PNG (matplotlib)."
    ),
) -> None:
    """Sweep a launched SGLang server over concurrency levels with SGLang's own benchmark client, sampling every
    GPU meanwhile; or, with --parse, read a saved benchmark output.

    Exit 0 ok, 1 a failed level (or failed run) or a regression against --baseline, 2 bad input.
    """
    from gpuhost.cli.config import json_output

    as_json = json_output(as_json)
    if parse is not None:
        if _given(ctx, "inventory") or concurrency is not None or baseline is not None:
            raise typer.BadParameter("--parse reads a file; it takes no -i, --concurrency or --baseline")
        _parse_file(parse, as_json, plot, gpu_samples)
        return
    if gpu_samples is not None:
        raise typer.BadParameter("--gpu-samples goes with --parse (a sweep samples the GPUs itself)")
    if inventory is None or concurrency is None:
        raise typer.BadParameter("a sweep needs -i INVENTORY and --concurrency LEVELS (or --parse FILE)")
    _sweep(
        inventory,
        limit=limit,
        ctid=ctid,
        concurrency=concurrency,
        input_len=input_len,
        output_len=output_len,
        prompts=prompts,
        warmup=warmup,
        dataset=dataset,
        tokenizer=tokenizer,
        interval_ms=interval_ms,
        level_timeout=level_timeout,
        baseline=baseline,
        out=out,
        as_json=as_json,
        plot=plot,
    )


def _load_baseline(path: Path) -> dict[str, Any]:
    from gpuhost.bench_serving.parse import loads
    from gpuhost.bench_serving.results import SCHEMA

    try:
        doc = loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        error(f"cannot read {path}: {exc.strerror or exc}")
        raise typer.Exit(2) from None
    except ValueError as exc:
        error(f"{path}: not JSON ({exc})")
        raise typer.Exit(2) from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(doc.get("levels"), list):
        error(f"{path}: not a {SCHEMA} result document (a run directory's result.json)")
        raise typer.Exit(2)
    return doc


def _sweep(inventory: Path, **o: Any) -> None:
    from gpuhost.bench_serving.results import render_table
    from gpuhost.bench_serving.sweep import SweepPlan, default_run_dir, parse_concurrency, run_sweep
    from gpuhost.inventory.loader import load_inventory
    from gpuhost.runner.connect import open_connection
    from gpuhost.serve.service import targets

    plan = SweepPlan(
        concurrencies=parse_concurrency(o["concurrency"]),
        input_len=o["input_len"],
        output_len=o["output_len"],
        prompts_per_level=o["prompts"],
        warmup_requests=o["warmup"],
        dataset=o["dataset"],
        tokenizer=o["tokenizer"],
        sample_interval_ms=o["interval_ms"],
        level_timeout_s=o["level_timeout"],
    )
    try:
        plan.check()
    except ValueError as exc:
        error(str(exc))
        raise typer.Exit(2) from None
    baseline = _load_baseline(o["baseline"]) if o["baseline"] is not None else None
    inv = load_inventory(inventory)
    found = targets(inv, limit=o["limit"], ctids=[o["ctid"]] if o["ctid"] is not None else None)
    if len(found) > 1:
        error(
            "more than one server: "
            + ", ".join(t.subject for t in found)
            + "; pick one with --limit NODE and/or --ctid N"
        )
        raise typer.Exit(2)
    t = found[0]
    run_dir = default_run_dir(o["out"], t.node, t.ctid)

    def progress(message: str) -> None:
        typer.echo(message, err=True)  # stdout stays the table (or the JSON)

    with open_connection(inv.nodes[t.node]) as conn:
        outcome = run_sweep(conn, plan, run_dir, ctid=t.ctid, baseline=baseline, subject=t.subject, progress=progress)
    doc = outcome.document
    if o["plot"] is not None:
        _draw(doc, o["plot"])
    if o["as_json"]:
        print_json(doc)
    else:
        typer.echo(render_table(doc), nl=False)
        comparison = doc.get("comparison")
        if comparison:
            typer.echo(f"\nagainst the baseline of {comparison.get('baseline_created')}: {comparison['verdict']}")
            for c in comparison["changes"]:
                if c["judgement"] in ("regression", "improvement"):
                    typer.echo(
                        f"  {c['judgement']:<11} {c['level']:>6} {c['figure']:<26} "
                        f"{c['baseline']:g} -> {c['current']:g} ({c['change_pct']:+.1f} %)"
                    )
        typer.echo(f"\nrun directory: {outcome.run_dir}")
        for name in ("json", "table", "plot", "samples"):
            if name in outcome.paths:
                typer.echo(f"  {name:<8} {outcome.paths[name]}")
    raise typer.Exit(outcome.exit_code)


def _draw(doc: dict[str, Any], png: Path) -> None:
    """The sweep plot of ``doc`` as ``png``; its path on stderr (stdout stays the table or the JSON)."""
    from gpuhost.bench_serving.plot import plot_sweep

    try:
        import matplotlib  # noqa: F401
    except ImportError:
        error("--plot needs matplotlib, which is not installed: pip install 'gpuhost[plot]'")
        raise typer.Exit(2) from None
    try:
        written = plot_sweep(doc, png)
    except OSError as exc:
        error(f"--plot {png}: {exc.strerror or exc}")
        raise typer.Exit(2) from None
    typer.echo(f"plot: {written}", err=True)


def _read_gpu_samples(path: Path) -> Any:
    """A saved dmon capture or sampler JSONL as a SampleSeries; exit 2 with the file and line when it is neither."""
    from gpuhost.bench_serving.dmon import NotDmonOutput, read_dmon
    from gpuhost.bench_serving.samples import read_samples

    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        error(f"cannot read {path}: {exc.strerror or exc}")
        raise typer.Exit(2) from None
    if text.lstrip().startswith("{"):
        series = read_samples(text)
        if series.ticks:
            return series
        error(f"{path}: no sample line in the sampler's JSON Lines")
        raise typer.Exit(2)
    try:
        series = read_dmon(text, str(path))
    except NotDmonOutput as exc:
        error(f"{exc} (--gpu-samples reads an 'nvidia-smi dmon' capture or the sampler's samples.jsonl)")
        raise typer.Exit(2) from None
    for note in series.notes:
        typer.echo(f"note: {note}: the row was left out", err=True)
    return series


def _parse_file(parse: Path, as_json: bool, plot: Path | None = None, gpu_samples: Path | None = None) -> None:
    from gpuhost.bench_serving.findings import all_findings
    from gpuhost.bench_serving.parse import NotBenchmarkOutput, parse_output
    from gpuhost.bench_serving.results import LevelRun, build_document, render_table, summarise, with_saved_samples

    try:
        text = parse.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        error(f"cannot read {parse}: {exc.strerror or exc}")
        raise typer.Exit(2) from None
    try:
        results = parse_output(text)
    except NotBenchmarkOutput as exc:
        error(f"{parse}: not a bench_serving output ({exc})")
        raise typer.Exit(2) from None
    levels = [
        LevelRun(
            concurrency=r.figures.get("max_concurrency") if isinstance(r.figures.get("max_concurrency"), int) else None,
            result=r,
            label=f"run{n + 1}",
        )
        for n, r in enumerate(results)
    ]
    summaries = summarise(levels, None)
    series = None
    if gpu_samples is not None:
        series = _read_gpu_samples(gpu_samples)
        try:
            summaries = with_saved_samples(summaries, series)
        except ValueError as exc:
            error(f"{parse}: {exc} (--gpu-samples)")
            raise typer.Exit(2) from None
    doc = build_document(summaries, all_findings(summaries), samples=series, source_file=parse.name)
    if plot is not None:
        _draw(doc, plot)
    if as_json:
        print_json(doc)
    else:
        typer.echo(render_table(doc), nl=False)
        for lv in doc["levels"]:
            typer.echo(f"\n{lv['label']} ({lv['source']}, {lv['status']}):")
            for name, value in lv["figures"].items():
                typer.echo(f"  {name:<36} {value}")
            for note in lv["notes"]:
                typer.echo(f"  note: {note}")
    raise typer.Exit(1 if any(r.status == "failed" for r in results) else 0)
