"""Import every module that registers checks, so :func:`gpuhost.checks.registered` lists them all."""

from __future__ import annotations

from gpuhost.checks import container, host  # noqa: F401
from gpuhost.checks.finding import CheckInfo, registered


def all_checks() -> dict[str, CheckInfo]:
    return registered()
