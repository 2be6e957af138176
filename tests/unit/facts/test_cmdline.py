import pytest

from gpuhost.facts.cmdline import (
    edit_grub_default,
    edit_tokens,
    find_grub_assignment,
    parse_kernel_cmdline_file,
    render_kernel_cmdline_file,
)


def test_edit_tokens_keeps_order_and_replaces_by_key():
    tokens = ["root=ZFS=rpool/ROOT/pve-1", "boot=zfs", "iommu=soft", "quiet"]
    assert edit_tokens(tokens, ["iommu=pt", "amd_iommu=on"]) == [
        "root=ZFS=rpool/ROOT/pve-1",
        "boot=zfs",
        "iommu=pt",
        "quiet",
        "amd_iommu=on",
    ]


def test_edit_tokens_is_idempotent_and_removes_absent():
    once = edit_tokens(["quiet", "amd_iommu=pt"], ["iommu=pt"], ["amd_iommu=pt"])
    assert once == ["quiet", "iommu=pt"]
    assert edit_tokens(once, ["iommu=pt"], ["amd_iommu=pt"]) == once


def test_edit_tokens_leaves_a_line_that_already_has_the_token():
    tokens = ["iommu=1", "amd_iommu=on", "iommu=pt", "console=tty0", "console=ttyS0"]
    assert edit_tokens(tokens, ["iommu=pt", "amd_iommu=on"]) == tokens


def test_edit_tokens_replaces_the_last_conflicting_value():
    assert edit_tokens(["iommu=1", "quiet", "iommu=soft"], ["iommu=pt"]) == ["iommu=1", "quiet", "iommu=pt"]


def test_kernel_cmdline_file_roundtrip():
    text = "root=ZFS=rpool/ROOT/pve-1 boot=zfs\n"
    tokens = parse_kernel_cmdline_file(text)
    assert (
        render_kernel_cmdline_file(edit_tokens(tokens, ["iommu=pt"])) == "root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt\n"
    )


GRUB = """\
# If you change this file, run 'update-grub' afterwards to update
# /boot/grub/grub.cfg.
GRUB_DEFAULT=0
GRUB_TIMEOUT=5
GRUB_DISTRIBUTOR="Proxmox VE"
#GRUB_CMDLINE_LINUX_DEFAULT="quiet intel_iommu=on"
GRUB_CMDLINE_LINUX_DEFAULT="quiet"   # edited by hand
GRUB_CMDLINE_LINUX=""
"""


def test_grub_edit_changes_only_the_active_line_and_keeps_quotes_and_comment():
    out = edit_grub_default(GRUB, ["iommu=pt", "amd_iommu=on"])
    lines = out.splitlines()
    assert lines[6] == 'GRUB_CMDLINE_LINUX_DEFAULT="quiet iommu=pt amd_iommu=on"   # edited by hand'
    assert [ln for i, ln in enumerate(lines) if i != 6] == [ln for i, ln in enumerate(GRUB.splitlines()) if i != 6]
    assert edit_grub_default(out, ["iommu=pt", "amd_iommu=on"]) == out


def test_grub_single_quotes_and_unquoted_values():
    assert (
        edit_grub_default("GRUB_CMDLINE_LINUX_DEFAULT='quiet splash'\n", ["iommu=pt"])
        == "GRUB_CMDLINE_LINUX_DEFAULT='quiet splash iommu=pt'\n"
    )
    assert (
        edit_grub_default("GRUB_CMDLINE_LINUX_DEFAULT=quiet\n", ["iommu=pt"])
        == 'GRUB_CMDLINE_LINUX_DEFAULT="quiet iommu=pt"\n'
    )


def test_grub_token_already_in_cmdline_linux_is_not_added_twice():
    text = 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX="iommu=pt"\n'
    assert edit_grub_default(text, ["iommu=pt"]) == text


def test_grub_without_the_variable_gets_one_appended():
    assert (
        edit_grub_default("GRUB_DEFAULT=0\n", ["iommu=pt"]) == 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="iommu=pt"\n'
    )


def test_grub_multiline_value_is_refused():
    with pytest.raises(ValueError, match="spans several lines"):
        find_grub_assignment('GRUB_CMDLINE_LINUX_DEFAULT="quiet\n  splash"\n')


def test_kernel_cmdline_file_is_its_first_line_only():
    # proxmox-kernel-helper zz-proxmox-boot: CMDLINE=$(get_first_line /etc/kernel/cmdline)
    text = "root=ZFS=rpool/ROOT/pve-1 boot=zfs\niommu=pt\n"
    assert parse_kernel_cmdline_file(text) == ["root=ZFS=rpool/ROOT/pve-1", "boot=zfs"]
    assert parse_kernel_cmdline_file("# a comment\nroot=ZFS=rpool/ROOT/pve-1\n") == ["#", "a", "comment"]
