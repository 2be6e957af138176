"""``gpuhost verify host|lxc|vm|serve``: the matching part of the acceptance suite, run in-process by pytest.

Each test's outcome and the finding of the check it called become one row of a :class:`SuiteReport`.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

from gpuhost.checks.finding import Finding

Kind = Literal["host", "lxc", "vm", "serve"]
SUITE = Path(__file__).resolve().parent / "suite"


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
    output: str = ""  # pytest's own terminal output (shown with -v)
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


class _Collector:
    """Turns pytest's reports into rows (the call phase, or the setup phase that failed or skipped)."""

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.drift: list[Any] | None = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        from gpuhost.acceptance.plugin import iter_findings

        if report.when == "call" or (report.when == "setup" and not report.passed):
            findings = tuple(iter_findings(report.user_properties))
            checks = [v for k, v in report.user_properties if k == "check"]
            path, _, param = report.nodeid.partition("[")
            param = param.rstrip("]")
            test = path.rsplit("/", 1)[-1] + (f"[{param}]" if param else "")
            name = test.split("::")[-1].split("[")[0].removeprefix("test_")
            outcome = {"passed": "PASS", "skipped": "SKIP"}.get(report.outcome, "FAIL")
            if report.outcome == "failed" and report.when == "setup":
                outcome = "ERROR"
            if report.skipped and isinstance(report.longrepr, tuple):
                message = str(report.longrepr[2]).removeprefix("Skipped: ")
            elif findings:
                worst = max(findings, key=lambda f: f.level)
                message = worst.message
            elif report.failed:
                message = _first_line(report.longreprtext)
            else:
                message = ""
            check = findings[0].check if len(findings) == 1 else (str(checks[0]) if checks else name)
            subjects = [str(v) for k, v in report.user_properties if k == "subject"]
            subject = findings[0].subject if findings else (subjects[0] if subjects else param)
            self.rows.append(Row(test, outcome, check, subject, message, findings))

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            where = report.nodeid.rsplit("/", 1)[-1] or "suite"
            self.rows.append(Row(where, "ERROR", "collect", where, _first_line(report.longreprtext)))

    def pytest_unconfigure(self, config: pytest.Config) -> None:  # after the plugin's sessionfinish
        self.drift = getattr(config, "_gpuhost_drift", None)


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


def run_suite(
    kind: Kind,
    inventory: Path,
    *,
    limit: str | None = None,
    ctids: list[int] | None = None,
    vmids: list[int] | None = None,
    junit_xml: Path | None = None,
    drift: bool = False,
) -> SuiteReport:
    args = [
        str(SUITE / f"test_{kind}.py"),
        "-c",
        str(SUITE / "pytest.ini"),
        "--rootdir",
        str(SUITE),
        "-p",
        "gpuhost.acceptance.plugin",
        "--gpuhost-inventory",
        str(inventory),
        "-q",
        "--assert=plain",  # the suite asserts nothing itself (its checks' findings fail a test): no rewriting
    ]
    if limit:
        args += ["--gpuhost-limit", limit]
    for c in ctids or ():
        args += ["--gpuhost-ctid", str(c)]
    for v in vmids or ():
        args += ["--gpuhost-vmid", str(v)]
    if junit_xml is not None:
        args += ["--junit-xml", str(junit_xml)]
    if drift:
        args.append("--drift")
    from gpuhost.acceptance import backend

    collector = _Collector()
    out = io.StringIO()
    backend.take_round_trips()  # count this suite's commands only
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), _no_plugin_autoload():
        code = pytest.main(args, plugins=[collector])
    return SuiteReport(kind, collector.rows, int(code), out.getvalue(), collector.drift, backend.take_round_trips())


@contextlib.contextmanager
def _no_plugin_autoload() -> Iterator[None]:
    """The suite needs only gpuhost's plugin (``-p``): the installed ones are not loaded (pytest's entry-point scan
    and the plugins' imports, anyio's event loops among them, were about 0.35 s of every ``verify``)."""
    import os

    before = os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
        else:
            os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = before


def dumps(report: SuiteReport) -> str:
    return json.dumps(report.to_json(), indent=2)
