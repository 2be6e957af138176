"""``verify``: the shared checks (:mod:`gpuhost.checks`) as a playbook task — ok when every finding passes,
failed with each finding's cause and fix otherwise. Read-only."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field, model_validator

from gpuhost.checks.container import ContainerExpectation
from gpuhost.checks.finding import Finding, Level
from gpuhost.checks.host import HostExpectation
from gpuhost.checks.table import container_findings, host_findings
from gpuhost.core.guest import Guest
from gpuhost.core.operation import Args, Operation, SkipTask
from gpuhost.core.plan import Plan, nothing
from gpuhost.errors import OperationFailed
from gpuhost.facts.container import container_facts
from gpuhost.facts.host import host_facts
from gpuhost.facts.pve import ct_status

if TYPE_CHECKING:
    from gpuhost.core.context import HostContext


class ContainerProofs(ContainerExpectation):
    """One container and what it must show."""

    ctid: int = Field(description="the container to verify")


class VerifyArgs(Args):
    host: HostExpectation | None = Field(default=None, description="proofs about the host")
    lxc: ContainerProofs | None = Field(default=None, description="proofs about one container")

    @model_validator(mode="after")
    def _one(self) -> VerifyArgs:
        if (self.host is None) == (self.lxc is None):
            raise ValueError("give exactly one of 'host' or 'lxc'")
        return self


def failure_text(findings: list[Finding]) -> str:
    parts = []
    for f in findings:
        if f.level < Level.FAIL:
            continue
        text = f.message + (f": {f.cause}" if f.cause else "") + (f" (fix: {f.fix})" if f.fix else "")
        parts.append(text)
    return "; ".join(parts)


def passed_text(findings: list[Finding]) -> str:
    return "; ".join(f.message for f in findings if f.level == Level.PASS) or "nothing to verify"


class Verify(Operation[VerifyArgs]):
    """Run the named checks against this host's facts (or one container's); never changes anything."""

    kind = "verify"
    Args = VerifyArgs

    def findings(self, host: HostContext) -> list[Finding]:
        a = self.args
        if a.host is not None:
            return host_findings(host.fact(host_facts), host.name, a.host)
        assert a.lxc is not None
        ct = Guest.ct(a.lxc.ctid)
        facts = host.guest(ct).fact(container_facts)
        return container_findings(facts, f"{host.name}/{ct}", a.lxc)

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        if host.reboot_pending:
            raise SkipTask("not verified: the host must reboot first (--allow-reboot)")
        if a.lxc is not None:
            ct = Guest.ct(a.lxc.ctid)
            if host.restart_pending(ct):
                raise SkipTask(f"not verified: {ct} must restart first (--allow-restart)")
            status = host.fact(ct_status, a.lxc.ctid)
            if status != "running":
                if host.check:
                    raise SkipTask(f"check mode: {ct} is {status or 'not created yet'}")
                raise OperationFailed(f"{ct} is {status or 'absent'}: cannot verify it")
        findings = self.findings(host)
        if any(f.failed for f in findings):
            if host.check:
                raise SkipTask("check mode: would verify after the changes; now: " + failure_text(findings))
            raise OperationFailed(failure_text(findings))
        return nothing(passed_text(findings))
