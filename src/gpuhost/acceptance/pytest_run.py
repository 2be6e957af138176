"""The acceptance suite run in-process by pytest (``gpuhost verify … --junit-xml FILE`` or ``-v``)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuhost.acceptance.report import Row, SuiteReport, SuiteRequest, make_row

SUITE = Path(__file__).resolve().parent / "suite"


class _Collector:
    """Turns pytest's reports into rows (the call phase, or the setup phase that failed or skipped)."""

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.drift: list[Any] | None = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or (report.when == "setup" and not report.passed):
            path, _, param = report.nodeid.partition("[")
            test = path.rsplit("/", 1)[-1] + (f"[{param}" if param else "")
            outcome = {"passed": "PASS", "skipped": "SKIP"}.get(report.outcome, "FAIL")
            if report.outcome == "failed" and report.when == "setup":
                outcome = "ERROR"
            if report.skipped and isinstance(report.longrepr, tuple):
                text = str(report.longrepr[2]).removeprefix("Skipped: ")
            else:
                text = report.longreprtext
            self.rows.append(make_row(test, outcome, list(report.user_properties), text))

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            where = report.nodeid.rsplit("/", 1)[-1] or "suite"
            self.rows.append(make_row(where, "ERROR", [("check", "collect"), ("subject", where)], report.longreprtext))

    def pytest_unconfigure(self, config: pytest.Config) -> None:  # after the plugin's sessionfinish
        self.drift = getattr(config, "_gpuhost_drift", None)


def run_under_pytest(request: SuiteRequest) -> SuiteReport:
    r = request
    args = [
        str(SUITE / f"test_{r.kind}.py"),
        "-c",
        str(SUITE / "pytest.ini"),
        "--rootdir",
        str(SUITE),
        "-p",
        "gpuhost.acceptance.plugin",
        "--gpuhost-inventory",
        str(r.inventory),
        "-q",
        "--assert=plain",  # the suite asserts nothing itself (its checks' findings fail a test): no rewriting
    ]
    if r.limit:
        args += ["--gpuhost-limit", r.limit]
    for c in r.ctids:
        args += ["--gpuhost-ctid", str(c)]
    for v in r.vmids:
        args += ["--gpuhost-vmid", str(v)]
    if r.junit_xml is not None:
        args += ["--junit-xml", str(r.junit_xml)]
    if r.drift:
        args.append("--drift")
    from gpuhost.acceptance import connections

    collector = _Collector()
    out = io.StringIO()
    connections.take_round_trips()  # count this suite's commands only
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), _no_plugin_autoload():
        code = pytest.main(args, plugins=[collector])
    return SuiteReport(
        r.kind, collector.rows, int(code), out.getvalue(), collector.drift, connections.take_round_trips()
    )


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
