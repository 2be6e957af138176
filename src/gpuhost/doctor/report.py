"""The doctor's one ranked list, as data: each entry's cause, evidence, fix, command and troubleshooting link;
its JSON document (schema ``gpuhost.doctor/1``) and its exit code."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from gpuhost.checks.finding import Level, registered
from gpuhost.doctor.commands import command_for, where_of
from gpuhost.doctor.gather import Observed
from gpuhost.doctor.rank import Ranked, rank

SCHEMA = "gpuhost.doctor/1"
#: The troubleshooting page, as the docs site builds it (``scripts/gen_reference.py``).
DOCS_PAGE = "troubleshooting.md"


def docs_anchor(check: str) -> str:
    """The troubleshooting page's anchor of a check (``scripts/gen_reference.py`` ``anchor``)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", check)


@dataclass(frozen=True)
class Entry:
    rank: int
    ranked: Ranked
    evidence: tuple[str, ...]
    fix: str | None
    command: str | None

    @property
    def docs(self) -> str:
        return f"{DOCS_PAGE}#{docs_anchor(self.ranked.finding.check)}"

    def to_json(self) -> dict[str, Any]:
        f = self.ranked.finding
        by = self.ranked.explained_by
        return {
            "rank": self.rank,
            **f.to_json(),
            "fix": self.fix,
            "stage": self.ranked.stage,
            "evidence": list(self.evidence),
            "command": self.command,
            "explained_by": None if by is None else {"check": by.check, "subject": by.subject},
            "docs": self.docs,
        }


@dataclass(frozen=True)
class Report:
    entries: tuple[Entry, ...]
    passed: int  # PASS findings (proofs), left out of the list
    trips: int

    @property
    def fatal(self) -> bool:
        return any(e.ranked.finding.level >= Level.FAIL for e in self.entries)

    @property
    def exit_code(self) -> int:
        """0: no FAIL (warnings allowed); 1: a FAIL finding."""
        return 1 if self.fatal else 0

    @property
    def top(self) -> Entry | None:
        return self.entries[0] if self.entries else None

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "fatal": self.fatal,
            "exit_code": self.exit_code,
            "round_trips": self.trips,
            "passed": self.passed,
            "findings": [e.to_json() for e in self.entries],
        }


def build_report(observed: Sequence[Observed], inventory: str, trips: int = 0) -> Report:
    """Rank what was observed; give each entry its evidence, fix (the finding's own, else its check's) and command."""
    evidence = {id(o.finding): o.evidence for o in observed}
    levels = {id(o.finding): o.levels for o in observed}
    checks = registered()
    entries = []
    for i, r in enumerate(rank([o.finding for o in observed]), start=1):
        f = r.finding
        info = checks.get(f.check)
        entries.append(
            Entry(
                rank=i,
                ranked=r,
                evidence=evidence.get(id(f)) or (f.message,),
                fix=f.fix or (" ".join(info.fix.split()) if info else None),
                command=command_for(f.check, replace(where_of(f.subject, inventory), levels=levels.get(id(f)))),
            )
        )
    passed = sum(1 for o in observed if o.finding.level == Level.PASS)
    return Report(tuple(entries), passed, trips)


def render(report: Report) -> list[str]:
    """The text report: one block per finding, best first."""
    out: list[str] = []
    for e in report.entries:
        f = e.ranked.finding
        out.append(f"{e.rank:>2}. {f.level.word:<4} {f.check}  {f.subject}  [{e.ranked.stage}]")
        out.append(f"    cause:    {f.cause or f.message}")
        for line in e.evidence:
            out.append(f"    evidence: {line}")
        if e.ranked.explained_by is not None:
            by = e.ranked.explained_by
            out.append(f"    explained by: {by.check} ({by.subject})")
        if e.fix:
            out.append(f"    fix:      {e.fix}")
        if e.command:
            out.append(f"    run:      {e.command}")
        out.append(f"    docs:     {e.docs}")
    fails = sum(1 for e in report.entries if e.ranked.finding.level >= Level.FAIL)
    warns = sum(1 for e in report.entries if e.ranked.finding.level == Level.WARN)
    if not report.entries:
        out.append("no finding: every check passed")
    out.append(
        f"{fails} FAIL, {warns} WARN, {len(report.entries) - fails - warns} INFO, {report.passed} passed "
        f"({report.trips} round trips)"
    )
    return out
