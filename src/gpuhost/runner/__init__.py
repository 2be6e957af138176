"""The runner: for each host, facts → operations decide → actions applied; results recorded.

The names below load on first use (PEP 562): importing :mod:`gpuhost.runner.results` stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuhost.runner.results import HostSummary, RunReport, TaskResult
    from gpuhost.runner.run import RunOptions, run_playbook

_LAZY = {"HostSummary": "gpuhost.runner.results", "RunReport": "gpuhost.runner.results",
         "TaskResult": "gpuhost.runner.results", "RunOptions": "gpuhost.runner.run",
         "run_playbook": "gpuhost.runner.run"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = ["HostSummary", "RunOptions", "RunReport", "TaskResult", "run_playbook"]
