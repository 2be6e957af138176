"""Boot state decided from the node: refresh when the loader boots something else than its source says;
no reboot that cannot change /proc/cmdline; no second reboot in a row for the same reason."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpuhost.core.actions import RebootHost, RunCommand, WriteFile
from gpuhost.errors import OperationFailed
from gpuhost.facts import files as file_facts
from gpuhost.facts.boot import REFRESH_RECORD, BootInfo, grub_cfg_tokens
from gpuhost.facts.host import host_facts
from gpuhost.facts.system import boot_id
from gpuhost.operations.boot import BootRefresh, BootRefreshArgs
from gpuhost.operations.reboot import LAST_REBOOT, RebootIfNeeded, RebootIfNeededArgs
from tests.unit.roles.test_roles import facts

SHA = "a" * 64
OTHER = "b" * 64
GRUB = BootInfo("grub", False, None)
GRUB_CFG = "\tlinux\t/boot/vmlinuz-6.8.12-4-pve root=/dev/mapper/pve-root ro quiet\n"


class Ctx:
    """Captured facts only: what an operation may see of a host."""

    def __init__(
        self, host_facts_value: Any, files: dict[str, str] | None = None, check: bool = False, boot: str = "boot-1"
    ) -> None:
        self.hf, self.files, self.check, self.name, self.vars = host_facts_value, files or {}, check, "pve1", {}
        self.boot = boot

    def fact(self, fact: Any, *args: Any) -> Any:
        if fact is host_facts:
            return self.hf
        if fact is boot_id:
            return self.boot
        assert fact is file_facts.content
        return self.files.get(args[0])


def test_grub_cfg_linux_line_is_what_grub_boots():
    assert grub_cfg_tokens(GRUB_CFG) == ("root=/dev/mapper/pve-root", "ro", "quiet")
    assert grub_cfg_tokens("menuentry {\n}\n") is None


def test_hand_edited_grub_default_without_update_grub_is_refreshed():
    f = facts(boot=GRUB, grub_effective_tokens=("quiet", "iommu=pt"), grub_cfg_tokens=grub_cfg_tokens(GRUB_CFG))
    plan = BootRefresh(BootRefreshArgs()).plan(Ctx(f))
    assert plan.actions == [RunCommand("update-grub")]
    assert plan.reason.startswith("update-grub: /boot/grub/grub.cfg lacks iommu=pt")


def test_grub_cfg_in_step_with_the_defaults_needs_no_refresh():
    f = facts(boot=GRUB, grub_effective_tokens=("quiet",), grub_cfg_tokens=grub_cfg_tokens(GRUB_CFG))
    assert not BootRefresh(BootRefreshArgs()).plan(Ctx(f)).changes


def test_a_token_removed_from_the_defaults_but_still_in_grub_cfg_is_refreshed():
    cfg = grub_cfg_tokens(GRUB_CFG.replace("quiet", "quiet iommu=pt"))
    f = facts(boot=GRUB, grub_effective_tokens=("quiet",), grub_cfg_tokens=cfg)
    assert "still has iommu=pt" in BootRefresh(BootRefreshArgs()).plan(Ctx(f)).reason


@pytest.mark.parametrize("record", [None, OTHER])
def test_systemd_boot_refreshes_until_the_record_matches_the_file(record):
    f = facts(kernel_cmdline_sha=SHA, refreshed_sha=record)
    plan = BootRefresh(BootRefreshArgs()).plan(Ctx(f))
    assert plan.actions[0] == RunCommand("proxmox-boot-tool refresh")
    assert plan.actions[2] == WriteFile(REFRESH_RECORD, f"{SHA}  /etc/kernel/cmdline\n", 0o644, backup=False)
    assert not BootRefresh(BootRefreshArgs()).plan(Ctx(facts(kernel_cmdline_sha=SHA, refreshed_sha=SHA))).changes


def test_no_reboot_when_the_loader_was_not_refreshed():
    f = facts(kernel_cmdline_tokens=("boot=zfs", "iommu=pt"), kernel_cmdline_sha=SHA, refreshed_sha=OTHER)
    with pytest.raises(OperationFailed, match="a reboot would not help: the boot loader was not refreshed"):
        RebootIfNeeded(RebootIfNeededArgs(cmdline=["iommu=pt"])).plan(Ctx(f))


def test_no_reboot_when_grub_cfg_would_not_boot_the_token():
    f = facts(boot=GRUB, grub_effective_tokens=("quiet",), grub_cfg_tokens=grub_cfg_tokens(GRUB_CFG))
    with pytest.raises(OperationFailed, match="a reboot would not help"):
        RebootIfNeeded(RebootIfNeededArgs(cmdline=["iommu=pt"])).plan(Ctx(f))


def test_reboot_records_why_then_refuses_the_same_reboot_again():
    f = facts(kernel_cmdline_tokens=("boot=zfs", "iommu=pt"), kernel_cmdline_sha=SHA, refreshed_sha=SHA)
    op = RebootIfNeeded(RebootIfNeededArgs(cmdline=["iommu=pt"]))
    plan = op.plan(Ctx(f))
    # one action: the reboot, whose own request writes the record once the checks before it passed
    [reboot] = plan.actions
    assert isinstance(reboot, RebootHost) and reboot.record is not None and reboot.pending_from is None
    path, content = reboot.record
    assert path == LAST_REBOOT
    assert json.loads(content) == {"reason": "booted without iommu=pt", "booted": "boot=zfs", "boot_id": "boot-1"}
    # the node rebooted (another boot id) and still booted without the token: no second reboot
    with pytest.raises(OperationFailed, match="refusing a second reboot for the same reason"):
        op.plan(Ctx(f, {LAST_REBOOT: content + "\n"}, boot="boot-2"))
    # a record of gpuhost before the boot id was kept counts as a reboot that happened
    old = json.dumps({"reason": "booted without iommu=pt", "booted": "boot=zfs"}) + "\n"
    with pytest.raises(OperationFailed, match="refusing a second reboot for the same reason"):
        op.plan(Ctx(f, {LAST_REBOOT: old}, boot="boot-2"))
    # still the boot the reboot was asked from (the run was killed as it issued it, and re-run at once): reboot
    again = op.plan(Ctx(f, {LAST_REBOOT: content + "\n"}, boot="boot-1"))
    assert again.reason == "booted without iommu=pt (the reboot asked for before has not happened yet)"
    [pending] = again.actions
    assert isinstance(pending, RebootHost) and pending.pending_from == "boot-1"  # the runner waits for that one first
    # a reboot that changed /proc/cmdline since (another reason now) is allowed
    moved = facts(
        kernel_cmdline_tokens=("boot=zfs", "iommu=pt"),
        kernel_cmdline_sha=SHA,
        refreshed_sha=SHA,
        booted_tokens=("boot=zfs", "quiet"),
    )
    assert op.plan(Ctx(moved, {LAST_REBOOT: content + "\n"}, boot="boot-2")).changes
