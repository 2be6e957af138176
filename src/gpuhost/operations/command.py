"""``command``: run a command unless a fact says it is done (``creates``, ``removes``, ``unless``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from gpuhost.core.actions import RunCommand
from gpuhost.core.operation import Args, Operation
from gpuhost.core.plan import Plan, nothing
from gpuhost.facts import files as file_facts

if TYPE_CHECKING:
    from gpuhost.core.context import HostContext


class CommandArgs(Args):
    cmd: str = Field(description="the shell command to run (redacted in output)")
    creates: str | None = Field(default=None, description="skip when this path exists")
    removes: str | None = Field(default=None, description="skip when this path does not exist")
    unless: str | None = Field(default=None, description="skip when this command succeeds")
    ok_codes: list[int] = Field(default=[0], description="exit codes that count as success")
    timeout: float | None = Field(
        default=None, description="seconds before the command is stopped (CommandTimeout); null: no limit"
    )


class Command(Operation[CommandArgs]):
    """Without a guard it always runs and reports ``changed``, as in Ansible."""

    kind = "command"
    Args = CommandArgs

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        if a.creates and host.fact(file_facts.exists, a.creates):
            return nothing(f"{a.creates} exists")
        if a.removes and not host.fact(file_facts.exists, a.removes):
            return nothing(f"{a.removes} does not exist")
        if a.unless and host.fact(file_facts.succeeds, a.unless):
            return nothing(f"'{a.unless}' succeeded")
        return Plan(reason=f"run {a.cmd}", actions=[RunCommand(a.cmd, tuple(a.ok_codes), a.timeout)])
