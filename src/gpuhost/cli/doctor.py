"""``gpuhost doctor``: explain failures from what a machine left behind (logs)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from gpuhost.cli.root import app

doctor_app = typer.Typer(help="Explain failures from logs.", no_args_is_help=True)
app.add_typer(doctor_app, name="doctor")


@doctor_app.command("sglang-log")
def sglang_log(
    file: str = typer.Argument(..., metavar="FILE|-", help="SGLang log file (journal export, paste), or - for stdin."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (schema gpuhost.doctor-sglang-log/1)."),
) -> None:
    """Match an SGLang log against known crash signatures and say how far start-up got.

    Exit 0 no fatal finding, 1 a fatal one, 2 unreadable input.
    """
    from gpuhost.cli.output import print_json
    from gpuhost.serve.logscan import scan_text

    try:
        data = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
    except OSError as exc:
        typer.echo(f"error: cannot read {file}: {exc.strerror}", err=True)
        raise typer.Exit(2) from None
    scanner = scan_text(data.decode("utf-8", errors="replace"), subject="-" if file == "-" else file)
    state = scanner.phases.state
    if as_json:
        print_json(
            {
                "schema": "gpuhost.doctor-sglang-log/1",
                "fatal": scanner.fatal,
                "phase": state.phase.name.lower(),
                "graph_captures_open": state.graph_captures_open,
                "findings": [
                    {**h.finding.to_json(), "lines": [{"line": n, "text": t} for n, t in h.lines]}
                    for h in scanner.report()
                ],
            }
        )
        raise typer.Exit(1 if scanner.fatal else 0)
    for hit in scanner.report():
        f = hit.finding
        typer.echo(f"{f.level.word:<4} {f.check}: {f.message}")
        if f.cause:
            typer.echo(f"     cause: {f.cause}")
        if f.fix:
            typer.echo(f"     fix:   {f.fix}")
        for n, text in hit.lines:
            typer.echo(f"     {n:>6} | {text}")
    phase = state.phase.name.lower().replace("_", " ")
    extra = " (a CUDA graph capture began and did not end)" if state.graph_captures_open else ""
    typer.echo(f"start-up reached: {phase}{extra}")
    if not scanner.hits:
        typer.echo("no known signature found")
    raise typer.Exit(1 if scanner.fatal else 0)
