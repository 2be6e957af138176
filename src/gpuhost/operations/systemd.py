"""``systemd``: a unit enabled and/or started."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from gpuhost.core.actions import RunCommand
from gpuhost.core.operation import Args, Operation
from gpuhost.core.plan import Plan, nothing
from gpuhost.errors import OperationFailed
from gpuhost.facts import systemd as unit_facts

if TYPE_CHECKING:
    from gpuhost.core.context import HostContext


class SystemdArgs(Args):
    unit: str = Field(description="the unit name, e.g. nvidia-persistenced.service")
    enabled: bool | None = Field(default=None, description="enabled at boot (true/false); null leaves it")
    state: Literal["started", "stopped", "restarted"] | None = Field(
        default=None, description="started, stopped or restarted; null leaves it"
    )
    daemon_reload: bool = Field(default=False, description="systemctl daemon-reload first (after a unit file changed)")


class Systemd(Operation[SystemdArgs]):
    """A systemd unit enabled or disabled at boot, and started, stopped or restarted."""

    kind = "systemd"
    Args = SystemdArgs

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        u = shlex.quote(a.unit)
        state = host.fact(unit_facts.unit_state, a.unit)
        actions: list[RunCommand] = []
        why: list[str] = []
        if a.daemon_reload and host.fact(unit_facts.systemd_running):
            actions.append(RunCommand("systemctl daemon-reload"))
        if a.enabled is not None:
            if state.enabled == "not-found" and not host.check:
                raise OperationFailed(f"unit {a.unit} does not exist")
            is_enabled = state.enabled in ("enabled", "enabled-runtime", "alias", "static", "indirect")
            if a.enabled and not is_enabled:
                actions.append(RunCommand(f"systemctl enable {u}"))
                why.append("enable")
            elif not a.enabled and state.enabled == "enabled":
                actions.append(RunCommand(f"systemctl disable {u}"))
                why.append("disable")
        if a.state is not None:
            if not host.fact(unit_facts.systemd_running):
                raise OperationFailed(f"cannot make {a.unit} {a.state}: systemd is not running on this host")
            if a.state == "restarted" or (a.state == "started") != (state.active == "active"):
                verb = {"started": "start", "stopped": "stop", "restarted": "restart"}[a.state]
                actions.append(RunCommand(f"systemctl {verb} {u}"))
                why.append(verb)
        if not why:
            return nothing(f"{a.unit}: {state.enabled}, {state.active}")
        return Plan(reason=f"{' and '.join(why)} {a.unit}", actions=list(actions))
