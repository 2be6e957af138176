"""``reboot``: reboot and wait for the host to come back; only with the user's consent."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuhost.operations.actions import Reboot as RebootAction
from gpuhost.operations.base import Args, Operation, Plan
from gpuhost.operations.registry import register

if TYPE_CHECKING:
    from gpuhost.runner.context import HostContext


class RebootArgs(Args):
    reason: str = "requested by the playbook"
    timeout: float = 900.0


@register
class Reboot(Operation):
    """Always reboots when it runs: use it as a handler so it runs only after a change."""

    kind = "reboot"
    Args = RebootArgs
    args: RebootArgs

    def plan(self, host: HostContext) -> Plan:
        return Plan(reason=f"reboot: {self.args.reason}",
                    actions=[RebootAction(self.args.reason, self.args.timeout)])
