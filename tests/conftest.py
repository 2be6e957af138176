from __future__ import annotations

import pytest

from gpuhost.redact import forget_all

#: Modules that must run whole wherever they are collected (CI runs them all): a skip in one of them fails the
#: session. The fleet and multi-node modules skip without the smg wheel that scripts/setup.sh caches; the become
#: test skips without sudo, which scripts/setup.sh installs.
REQUIRED = (
    "tests/integration/lab/test_fleet.py",
    "tests/integration/lab/test_multinode.py",
    "tests/integration/test_operator_become.py",
)

#: Per-test timeouts (pytest-timeout) by marker, for the slow lab tests: the default of the pytest config
#: (120 s) is for a unit test; these are well above the longest run measured for each kind.
TIMEOUTS = {"faults": 1800, "integration": 900}

_required_skips: list[str] = []


@pytest.fixture(autouse=True)
def _no_leftover_secrets():
    yield
    forget_all()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("timeout") is not None:
            continue  # a test's own timeout wins
        for marker, seconds in TIMEOUTS.items():
            if item.get_closest_marker(marker) is not None:
                item.add_marker(pytest.mark.timeout(seconds))
                break


def required_module(nodeid: str) -> str | None:
    """The REQUIRED module ``nodeid`` belongs to, if any."""
    path = nodeid.split("::", 1)[0]
    return path if path in REQUIRED else None


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and required_module(report.nodeid) and not hasattr(report, "wasxfail"):
        _required_skips.append(f"{report.nodeid}: {skip_reason(report)}")


def skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _required_skips and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:  # noqa: ANN001
    if _required_skips:
        terminalreporter.section("required modules skipped (tests/conftest.py REQUIRED)", red=True)
        for line in _required_skips:
            terminalreporter.line(line, red=True)
