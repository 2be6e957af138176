"""Printing for the terminal: live task lines, diffs, the recap table.

Rich is imported when something is printed, not when this module is imported: ``gpuhost --help``
and ``--version`` never need it.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from gpuhost.redact import redact

if TYPE_CHECKING:
    from rich.console import Console

    from gpuhost.runner.results import RunReport, TaskResult

_STYLE = {"ok": "green", "changed": "yellow", "failed": "bold red", "skipped": "cyan"}


#: the width given to a console that is not a terminal: wide enough that no column is ever cut (no ``…``)
PLAIN_WIDTH = 10_000


class _LazyConsole:
    """A :class:`rich.console.Console` made on first use (``console.print(...)`` works as usual).

    When its stream is not a terminal (a pipe, a file, CI), output is made for logs and tickets:
    no colour, tables without box drawing, and no column cut to fit 80 characters.
    """

    def __init__(self, stderr: bool) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    def _real(self) -> Console:
        if self._console is None:
            from rich.console import Console

            console = Console(stderr=self._stderr, highlight=False, soft_wrap=True)
            if not console.is_terminal:
                console = Console(
                    stderr=self._stderr, highlight=False, soft_wrap=True, width=PLAIN_WIDTH, no_color=True
                )
            self._console = console
        return self._console

    @property
    def plain(self) -> bool:
        return not self._real().is_terminal

    def print(self, *objects: Any, **kwargs: Any) -> None:
        real = self._real()
        objects = tuple(_safe(o) for o in objects)
        if not real.is_terminal:
            objects = tuple(_plain(o) for o in objects)
        real.print(*objects, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real(), name)


def _safe(renderable: Any) -> Any:
    """``renderable`` with control characters in its text shown escaped (:func:`gpuhost.redact.printable`):
    text from outside (a log line, a capture's GPU name, remote output) never reaches the terminal raw."""
    from rich.table import Table
    from rich.text import Text

    from gpuhost.redact import printable

    if isinstance(renderable, str):
        return printable(renderable)
    if isinstance(renderable, Text):
        clean = printable(renderable.plain)
        return renderable if clean == renderable.plain else Text(clean, style=renderable.style)
    if isinstance(renderable, Table):
        for column in renderable.columns:
            column._cells = [_safe(cell) for cell in column._cells]
    return renderable


def _plain(renderable: Any) -> Any:
    """A table printed for a log: no box drawing, nothing cut."""
    from rich.table import Table

    if isinstance(renderable, Table):
        renderable.box = None
        renderable.show_edge = False
        renderable.pad_edge = False
        for column in renderable.columns:
            column.overflow = "fold"
            column.no_wrap = True
    return renderable


console: Any = _LazyConsole(stderr=False)
err_console: Any = _LazyConsole(stderr=True)


def print_json(obj: Any) -> None:
    sys.stdout.write(redact(json.dumps(obj, indent=2, sort_keys=False)) + "\n")


def error(message: str) -> None:
    """``error: message`` on stderr (redacted)."""
    from rich.text import Text

    err_console.print(Text("error: ", style="bold red") + Text(redact(message)))


class LivePrinter:
    """Prints each task result as it arrives."""

    def __init__(self, show_diff: bool, check: bool, show_stdout: bool = False) -> None:
        self.show_diff = show_diff
        self.check = check
        self.show_stdout = show_stdout

    def __call__(self, r: TaskResult) -> None:
        from rich.text import Text

        label: str = r.status
        if r.status == "changed" and self.check:
            label = "would change"
        line = Text(f"[{r.host}] ")
        line += Text(f"{label:<13}", style=_STYLE[r.status])
        line += Text(("handler: " if r.handler else "") + r.task)
        detail = r.error or r.reason
        if detail:
            line += Text(f" — {redact(detail)}", style="dim" if not r.error else "red")
        console.print(line)
        for warning in r.warnings:
            console.print(Text(f"    [WARNING]: {redact(warning)}", style="yellow"))
        if self.show_stdout and r.stdout:
            for out in redact(r.stdout).splitlines():
                console.print(Text("    | " + out, style="dim"))
        if self.show_diff and r.diff:
            for d in redact(r.diff).splitlines():
                style = "green" if d.startswith("+") else "red" if d.startswith("-") else "dim"
                console.print(Text("    " + d, style=style))


def _notes(s: Any) -> str:
    notes = []
    if s.unreachable:
        notes.append("unreachable")
    if s.reboot_required:
        notes.append("reboot required (--allow-reboot)")
    if s.rebooted:
        notes.append("rebooted")
    if s.restart_required:
        names = s.restart_guests or [f"guest {g}" for g in s.restart_required]
        notes.append("restart required: " + ", ".join(names) + " (--allow-restart)")
    return ", ".join(notes)


def task_line(r: TaskResult, check: bool) -> str:
    """One task result as plain text (what the live line says, for a log file)."""
    label = "would change" if r.status == "changed" and check else r.status
    line = f"[{r.host}] {label:<13}" + ("handler: " if r.handler else "") + r.task
    detail = r.error or r.reason
    return redact(line + (f" — {detail}" if detail else "") + f" ({r.duration:.2f} s)")


def recap_lines(report: RunReport) -> list[str]:
    """The recap as plain lines, one per host (``host ok=N changed=N failed=N skipped=N note``)."""
    out = ["recap" + (" (check mode: nothing was changed)" if report.check else "")]
    for host, s in report.hosts.items():
        note = _notes(s)
        out.append(
            f"{host} ok={s.ok} changed={s.changed} failed={s.failed} skipped={s.skipped}" + (f" {note}" if note else "")
        )
    out.append(f"{len(report.results)} tasks in {report.duration:.2f} s")
    return out


def print_recap(report: RunReport, round_trips: bool = False) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(title="recap" + (" (check mode: nothing was changed)" if report.check else ""), title_justify="left")
    for col in ("host", "ok", "changed", "failed", "skipped", "note"):
        table.add_column(col)
    for host, s in report.hosts.items():
        table.add_row(
            host,
            str(s.ok),
            Text(str(s.changed), style="yellow" if s.changed else ""),
            Text(str(s.failed), style="bold red" if s.failed else ""),
            str(s.skipped),
            _notes(s),
        )
    console.print(table)
    console.print(f"{len(report.results)} tasks in {report.duration:.2f} s")
    if round_trips:  # -v: remote commands after connecting, per host (also in --json)
        console.print("round trips: " + ", ".join(f"{h} {s.round_trips}" for h, s in report.hosts.items()))


_LEVEL_STYLE = {"PASS": "green", "INFO": "cyan", "WARN": "yellow", "FAIL": "bold red"}


def print_findings(findings: list[Any]) -> None:
    """One line per finding (level, subject, check, message), then its cause and fix indented."""
    from rich.text import Text

    for f in findings:
        word = f.level.word
        line = Text(f"{word:<5} ", style=_LEVEL_STYLE.get(word, "")) + Text(f"{f.subject}  {f.check}  ")
        line += Text(redact(f.message))
        console.print(line)
        if f.level.word in ("WARN", "FAIL"):
            if f.cause:
                console.print(Text(f"      cause: {redact(f.cause)}", style="dim"))
            if f.fix:
                console.print(Text(f"      fix:   {redact(f.fix)}", style="dim"))
    failed = sum(1 for f in findings if f.level.word == "FAIL")
    console.print(f"{len(findings)} checks, {failed} failed")


def print_suite(report: Any) -> None:
    """The acceptance suite's result table (one row per test), each failure's cause and fix, then drift."""
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False, show_edge=False)
    for col in ("RESULT", "SUBJECT", "CHECK", "FINDING"):
        table.add_column(col, overflow="fold")
    styles = {"PASS": "green", "FAIL": "red bold", "ERROR": "red bold", "SKIP": "yellow"}
    for r in report.rows:
        table.add_row(Text(r.outcome, style=styles.get(r.outcome, "")), r.subject, r.check, redact(r.message))
    console.print(table)
    for r in report.rows:
        for f in r.findings:
            if f.failed and (f.cause or f.fix):
                console.print(Text(f"{f.check} {f.subject}:", style="bold"))
                if f.cause:
                    console.print(Text(f"      cause: {redact(f.cause)}", style="dim"))
                if f.fix:
                    console.print(Text(f"      fix:   {redact(f.fix)}", style="dim"))
    counts = {k: sum(1 for r in report.rows if r.outcome == k) for k in ("PASS", "FAIL", "ERROR", "SKIP")}
    console.print(", ".join(f"{v} {k.lower()}" for k, v in counts.items() if v) or "no tests ran")
    if report.drift is not None:
        from gpuhost.acceptance.drift import render

        console.print(Text("drift since the last provision", style="bold"))
        for line in render(report.drift):
            console.print(line, markup=False, highlight=False)
