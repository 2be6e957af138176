"""What a ``verify`` reports: each test's outcome and the finding of the check it called, one :class:`Row` each
of a :class:`SuiteReport`, the same whichever runner ran the proofs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gpuhost.checks.finding import Finding

Kind = Literal["host", "lxc", "vm", "serve"]


@dataclass(frozen=True)
class SuiteRequest:
    """What a ``verify`` asks for: the kind, the inventory, the selection, JUnit XML and drift."""

    kind: Kind
    inventory: Path
    limit: str | None = None
    ctids: tuple[int, ...] = ()
    vmids: tuple[int, ...] = ()
    junit_xml: Path | None = None
    drift: bool = False


@dataclass(frozen=True)
class Row:
    test: str  # e.g. test_lxc.py::test_container[pve1/200-ct.memlock]
    outcome: str  # PASS, FAIL, ERROR, SKIP
    check: str
    subject: str
    message: str
    findings: tuple[Finding, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "test": self.test,
            "outcome": self.outcome,
            "check": self.check,
            "subject": self.subject,
            "message": self.message,
            "findings": [f.to_json() for f in self.findings],
        }


@dataclass
class SuiteReport:
    kind: str
    rows: list[Row] = field(default_factory=list)
    pytest_exit: int = 0
    output: str = ""  # pytest's own terminal output (shown with -v; empty when run without pytest)
    drift: list[Any] | None = None
    round_trips: int = 0  # remote commands run for the suite (each one round trip after connecting)

    @property
    def exit_code(self) -> int:
        if any(r.outcome in ("FAIL", "ERROR") for r in self.rows):
            return 1
        return 0 if self.pytest_exit in (0, 5) and self.rows else 2 if not self.rows else 1

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "schema": "gpuhost.verify/2",
            "kind": self.kind,
            "ok": self.exit_code == 0,
            "exit_code": self.exit_code,
            "tests": [r.to_json() for r in self.rows],
            "findings": [f.to_json() for r in self.rows for f in r.findings],
            "round_trips": self.round_trips,
        }
        if self.drift is not None:
            doc["drift"] = [d.to_json() for d in self.drift]
        return doc


def make_row(test: str, outcome: str, properties: list[tuple[str, Any]], text: str) -> Row:
    """A test's row: ``test`` as ``MODULE::test_NAME[PARAM]``, its outcome, the properties its proof recorded,
    and ``text``, the reason of a skip or the failure's own text."""
    from gpuhost.acceptance.proof import iter_findings

    findings = tuple(iter_findings(properties))
    checks = [v for k, v in properties if k == "check"]
    param = test.partition("[")[2].removesuffix("]")
    name = test.split("::")[-1].split("[")[0].removeprefix("test_")
    if outcome == "SKIP":
        message = text
    elif findings:
        message = max(findings, key=lambda f: f.level).message
    elif outcome in ("FAIL", "ERROR"):
        message = _first_line(text)
    else:
        message = ""
    check = findings[0].check if len(findings) == 1 else (str(checks[0]) if checks else name)
    subjects = [str(v) for k, v in properties if k == "subject"]
    subject = findings[0].subject if findings else (subjects[0] if subjects else param)
    return Row(test, outcome, check, subject, message, findings)


def _first_line(text: str) -> str:
    """The error of a failed test: pytest's first ``E`` line, else the first line of the message."""
    for line in text.splitlines():
        if line.startswith("E "):
            return line[2:].strip().removeprefix("Failed: ")
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("_", "[")):
            return line.removeprefix("Failed: ").removeprefix("E ").strip()
    return text.strip()[:200]
