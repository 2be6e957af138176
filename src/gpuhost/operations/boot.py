"""Kernel command line operations: set tokens in the file the boot loader really reads, refresh it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field, field_validator

from gpuhost.core.actions import RunCommand, WriteFile
from gpuhost.core.operation import Args, Operation
from gpuhost.core.plan import Plan, file_plan, nothing
from gpuhost.errors import OperationFailed
from gpuhost.facts import files as file_facts
from gpuhost.facts.boot import (
    GRUB_DEFAULT,
    GRUB_DROPIN_DIR,
    GRUB_EFFECTIVE_SOURCE,
    KERNEL_CMDLINE,
    REFRESH_RECORD,
    STATE_DIR,
    grub_effective_sha,
    refresh_record,
)
from gpuhost.facts.cmdline import (
    edit_grub_default,
    edit_tokens,
    missing_tokens,
    parse_kernel_cmdline_file,
    render_grub_dropin,
    render_kernel_cmdline_file,
)
from gpuhost.facts.host import host_facts

if TYPE_CHECKING:
    from gpuhost.core.context import HostContext

#: Tokens gpuhost never leaves on a command line: the kernel ignores them with a warning and
#: the user believes the IOMMU is in passthrough mode when it is not.
NEVER = ("amd_iommu=pt", "intel_iommu=pt")


class KernelCmdlineArgs(Args):
    present: list[str] = Field(description="tokens that must be on the command line, e.g. iommu=pt")
    absent: list[str] = Field(
        default=[],
        description="tokens that must not be (intel_iommu=pt is always removed: the kernel does not know it)",
    )
    grub_dropin: bool = Field(
        default=False, description="on GRUB hosts, write the tokens to a drop-in file instead of /etc/default/grub"
    )
    dropin_file: str = Field(
        default=f"{GRUB_DROPIN_DIR}/90-gpuhost.cfg", description="the GRUB drop-in file used with grub_dropin"
    )

    @field_validator("present", "absent")
    @classmethod
    def _tokens(cls, v: list[str]) -> list[str]:
        for t in v:
            if not t or any(c.isspace() for c in t) or any(c in t for c in "\"'$`\\"):
                raise ValueError(f"'{t}' is not a single kernel command-line token")
        return v


class KernelCmdline(Operation[KernelCmdlineArgs]):
    """Tokens on the kernel command line, in ``/etc/default/grub`` or ``/etc/kernel/cmdline``
    according to the boot loader the host really uses (see :mod:`gpuhost.facts.boot`)."""

    kind = "kernel_cmdline"
    Args = KernelCmdlineArgs

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        wrong = [t for t in a.present if t in NEVER]
        if wrong:
            raise OperationFailed(
                f"refusing to put {', '.join(wrong)} on the command line: the kernel does not "
                "know it and stays in translated mode; use iommu=pt"
            )
        absent = [*a.absent, *NEVER]
        facts = host.fact(host_facts)
        boot = facts.boot
        if boot.loader == "systemd-boot":
            before = host.fact(file_facts.content, KERNEL_CMDLINE)
            if before is None:
                raise OperationFailed(f"this host boots with {boot.describe()}, but {KERNEL_CMDLINE} is missing")
            booted = parse_kernel_cmdline_file(before)
            if not any(t.startswith("root=") for t in booted):
                # proxmox-kernel-helper zz-proxmox-boot:49-53: the first line is the command line, and a
                # refresh stops with "No root= parameter in /etc/kernel/cmdline found!"
                raise OperationFailed(
                    f"{KERNEL_CMDLINE}: its first line ({before.split(chr(10), 1)[0]!r}) has no root= parameter; "
                    "PVE boots the first line only. Put the whole command line on line 1, then run again"
                )
            tokens = edit_tokens(booted, a.present, absent)
            after = render_kernel_cmdline_file(tokens)
            if parse_kernel_cmdline_file(before) == tokens:
                after = before  # keep the file byte for byte when nothing changes
            return _why(
                file_plan(
                    KERNEL_CMDLINE,
                    before,
                    after,
                    reason_same=f"{KERNEL_CMDLINE} has {' '.join(a.present)} ({boot.describe()})",
                ),
                boot.describe(),
            )
        before = host.fact(file_facts.content, GRUB_DEFAULT)
        if before is None:
            raise OperationFailed(f"this host boots with {boot.describe()}, but {GRUB_DEFAULT} is missing")
        try:
            main_after = edit_grub_default(before, [] if a.grub_dropin else a.present, absent)
        except ValueError as exc:
            raise OperationFailed(f"{GRUB_DEFAULT}: {exc}") from None
        plan = file_plan(
            GRUB_DEFAULT,
            before,
            main_after,
            reason_same=f"{GRUB_DEFAULT} has {' '.join(a.present)} ({boot.describe()})",
        )
        if a.grub_dropin:
            effective = facts.grub_effective_tokens or ()
            dropin_before = host.fact(file_facts.content, a.dropin_file)
            dropin_tokens = a.present if dropin_before is not None else missing_tokens(effective, a.present)
            if dropin_tokens:
                dplan = file_plan(a.dropin_file, dropin_before, render_grub_dropin(dropin_tokens))
                plan = Plan(
                    reason="; ".join(r for r in (plan.reason if plan.changes else "", dplan.reason) if r),
                    actions=plan.actions + dplan.actions,
                    diff=plan.diff + dplan.diff,
                )
        return _why(plan, boot.describe())


def _why(plan: Plan, boot: str) -> Plan:
    if plan.changes:
        plan.reason = f"{plan.reason} (host boots with {boot})"
    return plan


class BootRefreshArgs(Args):
    pass


class BootRefresh(Operation[BootRefreshArgs]):
    """Regenerate the boot loader's configuration (``update-grub`` or ``proxmox-boot-tool refresh``) when
    what it boots differs from its source file: the ``linux`` line of grub.cfg against the GRUB defaults;
    on systemd-boot, gpuhost's record of the ``/etc/kernel/cmdline`` it last refreshed onto the ESPs.
    Decided from the node every time, so a run killed before the refresh, or a file edited by hand,
    is refreshed by the next run."""

    kind = "boot_refresh"
    Args = BootRefreshArgs

    def plan(self, host: HostContext) -> Plan:
        facts = host.fact(host_facts)
        boot = facts.boot
        why = facts.refresh_needed
        if why is None:
            return nothing(f"the boot loader boots what {boot.cmdline_file} says ({boot.describe()})")
        actions: list[RunCommand | WriteFile] = [RunCommand(boot.refresh_command)]
        if boot.loader == "systemd-boot" and facts.kernel_cmdline_sha:
            actions.append(RunCommand(f"mkdir -p {STATE_DIR}"))
            actions.append(WriteFile(REFRESH_RECORD, refresh_record(facts.kernel_cmdline_sha), 0o644, backup=False))
        if boot.loader == "grub-pbt" and facts.grub_effective_tokens is not None:
            record = refresh_record(grub_effective_sha(facts.grub_effective_tokens), GRUB_EFFECTIVE_SOURCE)
            actions.append(RunCommand(f"mkdir -p {STATE_DIR}"))
            actions.append(WriteFile(REFRESH_RECORD, record, 0o644, backup=False))
        return Plan(reason=f"{boot.refresh_command}: {why} ({boot.describe()})", actions=list(actions))
