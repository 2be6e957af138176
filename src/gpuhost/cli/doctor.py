"""``gpuhost doctor -i INV``: the whole stack read live and ranked into one list of causes; ``gpuhost doctor
sglang-log|dmesg|nvidia-installer FILE``: explain failures from what a machine left behind (logs)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import BinaryIO

import typer

from gpuhost.cli.root import app

doctor_app = typer.Typer(invoke_without_command=True)
app.add_typer(doctor_app, name="doctor")


@doctor_app.callback()
def doctor_stack(
    ctx: typer.Context,
    inventory: Path | None = typer.Option(None, "-i", "--inventory", help="Inventory file (YAML): read it live."),
    limit: str | None = typer.Option(None, "--limit", "-l", help="Only these nodes or groups (comma list)."),
    ctid: list[int] = typer.Option([], "--ctid", help="Only this container (repeat for more); VMs are left out."),
    probe: bool = typer.Option(False, "--probe", help="Also measure every GPU pair (the P2P probe of verify p2p)."),
    bench_dir: Path = typer.Option(
        Path("gpuhost-bench"), "--bench-dir", help="Where `gpuhost bench sglang` made its run directories."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (schema gpuhost.doctor/1)."),
) -> None:
    """Diagnose the whole stack live (-i INV), or explain failures from saved logs (the subcommands).

    With -i: read host, guests, P2P, serving and the last bench run live (read-only) and print one ranked list
    of findings: cause, evidence, fix, the gpuhost command that applies it, and its troubleshooting entry.
    Ranked: a cause before the findings it explains; then FAIL, WARN, INFO; then host, guest, driver, P2P,
    serving, throughput. Exit 0 no FAIL finding, 1 a FAIL finding, 2 bad input (or neither -i nor a subcommand).
    """
    if ctx.invoked_subcommand is not None:
        if inventory is not None:
            raise typer.BadParameter(f"-i reads the stack live; `doctor {ctx.invoked_subcommand}` reads a file")
        return
    if inventory is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(2)
    from gpuhost.cli.output import print_json
    from gpuhost.doctor.run import diagnose

    report = diagnose(inventory, limit=limit, ctids=tuple(ctid), probe=probe, bench_dir=bench_dir)
    if as_json:
        print_json(report.to_json())
    else:
        from gpuhost.doctor.report import render

        for line in render(report):
            typer.echo(line)
    raise typer.Exit(report.exit_code)


@doctor_app.command("sglang-log")
def sglang_log(
    file: str = typer.Argument(..., metavar="FILE|-", help="SGLang log file (journal export, paste), or - for stdin."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (schema gpuhost.doctor-sglang-log/1)."),
    all_starts: bool = typer.Option(
        False, "--all-starts", help="Read every start in the log, not only the last one (gpuhost's start marker)."
    ),
) -> None:
    """Match an SGLang log against known crash signatures and say how far start-up got.

    A journal holds every start of the server; only the last one (from the last `gpuhost-sglang: start` line)
    is read, so an earlier start's crash is not reported for a server that started again.

    Exit 0 no fatal finding, 1 a fatal one, 2 unreadable input.

    Examples:
      journalctl -u gpuhost-sglang -o cat | gpuhost doctor sglang-log -
      gpuhost doctor sglang-log --json sglang.log
    """
    from gpuhost.cli.output import print_json
    from gpuhost.facts.serve_layout import MARKER_PREFIX
    from gpuhost.redact import for_terminal, printable
    from gpuhost.serve.logscan import scan_text

    text = _read_input(file)

    def echo(line: str) -> None:
        typer.echo(for_terminal(line))

    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if MARKER_PREFIX in line]
    skipped = 0 if all_starts or len(starts) < 2 else starts[-1]
    scanner = scan_text("".join(lines[skipped:]), subject="-" if file == "-" else file)
    state = scanner.phases.state
    if as_json:
        print_json(
            {
                "schema": "gpuhost.doctor-sglang-log/1",
                "starts": len(starts),
                "read_from_line": skipped + 1,
                "fatal": scanner.fatal,
                "phase": state.phase.name.lower(),
                "graph_captures_open": state.graph_captures_open,
                "findings": [
                    {
                        **h.finding.to_json(),
                        "evidence": printable(h.evidence) if h.evidence else h.evidence,
                        "lines": [{"line": n + skipped, "text": printable(t)} for n, t in h.lines],
                    }
                    for h in scanner.report()
                ],
            }
        )
        raise typer.Exit(1 if scanner.fatal else 0)
    for hit in scanner.report():
        f = hit.finding
        echo(f"{f.level.word:<4} {f.check}: {f.message}")
        if f.cause:
            echo(f"     cause: {f.cause}")
        if f.fix:
            echo(f"     fix:   {f.fix}")
        for n, line in hit.lines:
            echo(f"     {n + skipped:>6} | {line}")
    if skipped:
        typer.echo(f"read from line {skipped + 1}: the last of {len(starts)} starts (--all-starts reads every one)")
    phase = state.phase.name.lower().replace("_", " ")
    extra = " (a CUDA graph capture began and did not end)" if state.graph_captures_open else ""
    typer.echo(f"start-up reached: {phase}{extra}")
    if not scanner.hits:
        typer.echo("no known signature found")
    raise typer.Exit(1 if scanner.fatal else 0)


#: a log line longer than this is cut there (a 1 GB line must not make the scan grow without bound)
MAX_LINE_BYTES = 64 * 1024
#: and no more than this much of a log is read
MAX_LOG_BYTES = 1024 * 1024 * 1024


def read_log(stream: BinaryIO) -> str:
    """The log's text, each line cut at :data:`MAX_LINE_BYTES` (marked ``… [cut]``), at most
    :data:`MAX_LOG_BYTES` read; undecodable bytes are replaced."""
    out: list[str] = []
    total = 0
    while total < MAX_LOG_BYTES:
        line = stream.readline(MAX_LINE_BYTES)
        if not line:
            break
        total += len(line)
        if len(line) == MAX_LINE_BYTES and not line.endswith(b"\n"):
            while True:  # skip the rest of the over-long line
                rest = stream.readline(MAX_LINE_BYTES)
                total += len(rest)
                if not rest or rest.endswith(b"\n") or total >= MAX_LOG_BYTES:
                    break
            line = line + b" \xe2\x80\xa6 [cut]\n"
        out.append(line.decode("utf-8", errors="replace"))
    return "".join(out)


@doctor_app.command("dmesg")
def dmesg(
    file: str = typer.Argument(
        ..., metavar="FILE|-", help="Kernel log (dmesg, journalctl -k, syslog), or - for stdin."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (schema gpuhost.doctor-dmesg/1)."),
) -> None:
    """Read a host's kernel log: IOMMU state and DMA faults, NVRM API mismatch, GPUs the driver could not start.

    Exit 0 no failing finding, 1 a failing one, 2 unreadable input.
    """
    from gpuhost.checks import Level
    from gpuhost.checks.host import kernel_log_findings
    from gpuhost.cli.output import print_json
    from gpuhost.redact import for_terminal

    text = _read_input(file)
    subject = "-" if file == "-" else file
    iommu, findings = kernel_log_findings(text, subject)
    failed = any(f.level >= Level.FAIL for f in findings)
    if as_json:
        print_json(
            {
                "schema": "gpuhost.doctor-dmesg/1",
                "iommu": {"enabled": iommu.enabled, "translating": iommu.translating, "vendor": iommu.vendor},
                "findings": [f.to_json() for f in findings],
            }
        )
        raise typer.Exit(1 if failed else 0)
    typer.echo(for_terminal(f"IOMMU {iommu.summary}" + (f" ({iommu.vendor})" if iommu.vendor else "")))
    for f in findings:
        typer.echo(for_terminal(f"{f.level.word:<4} {f.check}: {f.message}"))
        if f.cause:
            typer.echo(for_terminal(f"     cause: {f.cause}"))
        if f.fix:
            typer.echo(for_terminal(f"     fix:   {f.fix}"))
    if not findings:
        typer.echo("no IOMMU fault, driver mismatch or GPU initialisation failure in this log")
    raise typer.Exit(1 if failed else 0)


@doctor_app.command("nvidia-installer")
def nvidia_installer(
    file: str = typer.Argument(
        ..., metavar="FILE|-", help="/var/log/nvidia-installer.log or the installer's output, or - for stdin."
    ),
) -> None:
    """Explain why an NVIDIA .run installer failed: its ERROR lines, the cause and the fix.

    Exit 0 no ERROR, 1 an ERROR, 2 unreadable input.
    """
    from gpuhost.checks.installer import nvidia_installer as judge
    from gpuhost.facts.nvidia_installer import parse_installer_log
    from gpuhost.redact import for_terminal

    text = _read_input(file)
    log = parse_installer_log(text)
    f = judge(log, "-" if file == "-" else file)
    typer.echo(for_terminal(f"{f.level.word:<4} {f.check}: {f.message}"))
    if f.cause:
        typer.echo(for_terminal(f"     cause: {f.cause}"))
    if f.fix:
        typer.echo(for_terminal(f"     fix:   {f.fix}"))
    for extra in log.errors[1:]:
        typer.echo(for_terminal(f"     also:  ERROR: {extra[:200]}"))
    raise typer.Exit(1 if f.failed else 0)


def _read_input(file: str) -> str:
    """A saved log's text (``-``: standard input), read through :func:`read_log`'s limits; exit 2 when unreadable."""
    try:
        if file == "-":
            return read_log(sys.stdin.buffer)
        with open(file, "rb") as fh:
            return read_log(fh)
    except OSError as exc:
        typer.echo(f"error: cannot read {file}: {exc.strerror}", err=True)
        raise typer.Exit(2) from None
