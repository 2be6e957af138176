"""The runner: for each host, facts → operations decide → actions applied; results recorded."""

from gpuhost.runner.results import HostSummary, RunReport, TaskResult
from gpuhost.runner.run import RunOptions, run_playbook

__all__ = ["HostSummary", "RunOptions", "RunReport", "TaskResult", "run_playbook"]
