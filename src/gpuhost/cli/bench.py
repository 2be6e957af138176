"""``gpuhost bench sglang``: read a saved SGLang serving-benchmark output (the sweep itself comes later)."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuhost.cli.output import error, print_json
from gpuhost.cli.root import app

bench_app = typer.Typer(help="Benchmark a serving machine and show what its GPUs did meanwhile.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")


@bench_app.command("sglang")
def sglang_command(
    parse: Path = typer.Option(
        ...,
        "--parse",
        help="Read a saved bench_serving output: the printed "
        "'Serving Benchmark Result' block(s) or the --output-file JSONL.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (schema gpuhost.bench-sglang/1)."),
) -> None:
    """Parse a saved SGLang benchmark output and print every figure under its stable name.

    Exit 0 parsed, 1 a failed run, 2 unreadable or not a benchmark output.
    """
    from gpuhost.bench_serving.findings import all_findings
    from gpuhost.bench_serving.parse import NotBenchmarkOutput, parse_output
    from gpuhost.bench_serving.results import LevelRun, build_document, render_table, summarise

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
    doc = build_document(summaries, all_findings(summaries), source_file=parse.name)
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
