"""``gpuhost verify host|lxc|vm|serve``: the matching part of the acceptance suite, run in-process."""

from __future__ import annotations

from pathlib import Path

from gpuhost.acceptance.report import Kind, SuiteReport, SuiteRequest


def run_suite(
    kind: Kind,
    inventory: Path,
    *,
    limit: str | None = None,
    ctids: list[int] | None = None,
    vmids: list[int] | None = None,
    junit_xml: Path | None = None,
    drift: bool = False,
    under_pytest: bool = False,
) -> SuiteReport:
    """Run the proofs of ``kind``: under pytest when asked (``under_pytest``, for its output) or for JUnit XML,
    else without pytest's start-up (:mod:`gpuhost.acceptance.plain`). Both give the same rows."""
    request = SuiteRequest(kind, inventory, limit, tuple(ctids or ()), tuple(vmids or ()), junit_xml, drift)
    if under_pytest or junit_xml is not None:
        from gpuhost.acceptance.pytest_run import run_under_pytest

        return run_under_pytest(request)
    from gpuhost.acceptance.plain import run_plain

    return run_plain(request)
