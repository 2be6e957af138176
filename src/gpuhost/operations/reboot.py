"""``reboot`` and ``reboot_if_needed``: reboot and wait for the host to come back; only with the operator's
consent (the runner decides that, never the operation)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from pydantic import Field

from gpuhost.checks.host import diagnose_cmdline
from gpuhost.core.actions import RebootHost
from gpuhost.core.operation import Args, Operation
from gpuhost.core.plan import Plan, nothing
from gpuhost.errors import OperationFailed
from gpuhost.facts import files as file_facts
from gpuhost.facts.boot import STATE_DIR
from gpuhost.facts.cmdline import missing_tokens
from gpuhost.facts.host import host_facts
from gpuhost.facts.system import boot_id

if TYPE_CHECKING:
    from gpuhost.core.context import HostContext


class RebootArgs(Args):
    reason: str = Field(default="requested by the playbook", description="why, shown in the recap and the log")
    timeout: float = Field(default=900.0, description="seconds to wait for the host to come back")


class Reboot(Operation[RebootArgs]):
    """Always reboots when it runs: use it as a handler so it runs only after a change."""

    kind = "reboot"
    Args = RebootArgs

    def plan(self, host: HostContext) -> Plan:
        return Plan(reason=f"reboot: {self.args.reason}", actions=[RebootHost(self.args.reason, self.args.timeout)])


#: the last reboot gpuhost asked for on this node: its reason, the command line booted before it and that boot's
#: id (written by the reboot's own request, so only for a reboot that was issued)
LAST_REBOOT = f"{STATE_DIR}/last-reboot.json"


def _last_reboot(text: str | None) -> tuple[str, str, str | None] | None:
    try:
        data = json.loads(text or "")
        boot = data.get("boot_id")
        return str(data["reason"]), str(data["booted"]), None if boot is None else str(boot)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


class RebootIfNeededArgs(Args):
    cmdline: list[str] = Field(
        default=[], description="tokens the booted command line must show; reboot when configured but not booted"
    )
    nvidia_driver: str | None = Field(
        default=None, description="the installed NVIDIA version; reboot when the loaded module is older"
    )


class RebootIfNeeded(Operation[RebootIfNeededArgs]):
    """Reboot when the booted command line or the loaded NVIDIA module lags what is installed."""

    kind = "reboot_if_needed"
    Args = RebootIfNeededArgs

    def plan(self, host: HostContext) -> Plan:
        facts = host.fact(host_facts)
        reasons = []
        missing = missing_tokens(facts.booted_tokens, self.args.cmdline)
        if missing:
            if not host.check:
                if facts.refresh_needed is not None:
                    raise OperationFailed(
                        f"a reboot would not help: the boot loader was not refreshed ({facts.refresh_needed}); "
                        f"run {facts.boot.refresh_command} (gpuhost provision host does) before rebooting"
                    )
                if missing_tokens(facts.loader_tokens or (), missing):
                    raise OperationFailed("a reboot would not help: " + diagnose_cmdline(facts, missing))
            reasons.append(f"booted without {' '.join(missing)}")
        want = self.args.nvidia_driver
        if want and facts.nvidia is not None and facts.nvidia.version != want:
            if facts.nvidia_installed == want:
                reasons.append(f"NVIDIA module {facts.nvidia.version} loaded, {want} installed")
            elif host.check:  # the install earlier in this run is only planned: its reboot is planned too
                reasons.append(f"NVIDIA module {facts.nvidia.version} loaded, {want} to be installed by this run")
        if not reasons:
            return nothing("the running kernel matches its configuration")
        why_now = reason = "; ".join(reasons)
        booted = " ".join(facts.booted_tokens)
        boot = host.fact(boot_id)
        last = None if host.check else _last_reboot(host.fact(file_facts.content, LAST_REBOOT))
        if last is not None and last[:2] == (why_now, booted):
            if last[2] is not None and last[2] == boot:
                # issued, but the node has not gone down yet (a run killed right after the request, re-run at once)
                # or the request failed: this is the same boot, so no reboot happened that failed to help
                reason += " (the reboot asked for before has not happened yet)"
            else:
                why = diagnose_cmdline(facts, missing) if missing else "the module on disk did not load"
                raise OperationFailed(
                    f"refusing a second reboot for the same reason ({why_now}): the last one did not change "
                    f"/proc/cmdline or the loaded module. {why}"
                )
        # recorded by the reboot's own request, once the checks before it passed (a refused reboot leaves no
        # record that would refuse the next one as "a second reboot for the same reason")
        record = json.dumps({"reason": why_now, "booted": booted, "boot_id": boot})
        pending = boot if last is not None and last[:2] == (why_now, booted) else None
        return Plan(reason=reason, actions=[RebootHost(reason, record=(LAST_REBOOT, record), pending_from=pending)])
