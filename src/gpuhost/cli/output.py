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


class _LazyConsole:
    """A :class:`rich.console.Console` made on first use (``console.print(...)`` works as usual)."""

    def __init__(self, stderr: bool) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    def _real(self) -> Console:
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=self._stderr, highlight=False, soft_wrap=True)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real(), name)


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

    def __init__(self, show_diff: bool, check: bool) -> None:
        self.show_diff = show_diff
        self.check = check

    def __call__(self, r: TaskResult) -> None:
        from rich.text import Text

        label = r.status
        if r.status == "changed" and self.check:
            label = "would change"
        line = Text(f"[{r.host}] ")
        line += Text(f"{label:<13}", style=_STYLE[r.status])
        line += Text(("handler: " if r.handler else "") + r.task)
        detail = r.error or r.reason
        if detail:
            line += Text(f" — {redact(detail)}", style="dim" if not r.error else "red")
        console.print(line)
        if self.show_diff and r.diff:
            for d in redact(r.diff).splitlines():
                style = "green" if d.startswith("+") else "red" if d.startswith("-") else "dim"
                console.print(Text("    " + d, style=style))


def print_recap(report: RunReport, round_trips: bool = False) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(title="recap" + (" (check mode: nothing was changed)" if report.check else ""), title_justify="left")
    for col in ("host", "ok", "changed", "failed", "skipped", "note"):
        table.add_column(col)
    for host, s in report.hosts.items():
        notes = []
        if s.unreachable:
            notes.append("unreachable")
        if s.reboot_required:
            notes.append("reboot required (--allow-reboot)")
        if s.rebooted:
            notes.append("rebooted")
        if s.restart_required:
            notes.append("restart required: CT " + ", ".join(map(str, s.restart_required)) + " (--allow-restart)")
        table.add_row(
            host,
            str(s.ok),
            Text(str(s.changed), style="yellow" if s.changed else ""),
            Text(str(s.failed), style="bold red" if s.failed else ""),
            str(s.skipped),
            ", ".join(notes),
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
