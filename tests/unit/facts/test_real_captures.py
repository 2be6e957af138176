"""Parsers and editors on real captured files and outputs (tests/fixtures/host/SOURCE.md)."""

import subprocess
from pathlib import Path

import pytest

from gpuhost.facts.boot import parse_boot_tool_status
from gpuhost.facts.cmdline import (
    edit_grub_default,
    edit_tokens,
    find_grub_assignment,
    parse_kernel_cmdline_file,
    render_kernel_cmdline_file,
)
from gpuhost.facts.hardware import (
    nvidia_gpus,
    parse_dmesg_iommu,
    parse_lspci_nn,
    parse_nvidia_version,
    parse_proc_devices,
)

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "host"
WANT = ["iommu=pt", "intel_iommu=on"]


def fixture(rel: str) -> str:
    return (FIX / rel).read_text()


def effective_grub_tokens(text: str, tmp_path: Path) -> list[str]:
    """What update-grub would put on the line: the file evaluated by a real shell."""
    f = tmp_path / "grub"
    f.write_text(text)
    out = subprocess.run(
        ["bash", "-c", f'. {f}; echo "$GRUB_CMDLINE_LINUX $GRUB_CMDLINE_LINUX_DEFAULT"'],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    return out.stdout.split()


@pytest.mark.parametrize("name", sorted(p.name for p in (FIX / "grub").glob("*.txt")))
def test_grub_edit_keeps_every_line_and_token(name, tmp_path):
    before = fixture(f"grub/{name}")
    after = edit_grub_default(before, WANT)
    old_tokens = effective_grub_tokens(before, tmp_path)
    new_tokens = effective_grub_tokens(after, tmp_path)
    # every existing token survives, in order; the wanted ones are there
    assert [t for t in new_tokens if t in old_tokens] == old_tokens
    assert all(t in new_tokens for t in WANT)
    # only the GRUB_CMDLINE_LINUX_DEFAULT line changed (or one line was appended)
    b, a = before.splitlines(), after.splitlines()
    changed = [i for i, (x, y) in enumerate(zip(b, a, strict=False)) if x != y]
    assert len(changed) <= 1 and len(a) - len(b) in (0, 1)
    if changed:
        assert a[changed[0]].lstrip().startswith("GRUB_CMDLINE_LINUX_DEFAULT=")
    assert before.endswith("\n") == after.endswith("\n")
    assert edit_grub_default(after, WANT) == after, "not idempotent"


def test_grub_active_line_wins_over_commented_one():
    text = fixture("grub/pve-intel-iommu-commented-quiet.txt")
    assert find_grub_assignment(text).tokens == ["intel_iommu=on"]
    assert 'GRUB_CMDLINE_LINUX_DEFAULT="intel_iommu=on iommu=pt"' in edit_grub_default(text, WANT)
    assert '#GRUB_CMDLINE_LINUX_DEFAULT="quiet"' in edit_grub_default(text, WANT)


def test_grub_tokens_in_cmdline_linux_count_as_present():
    text = fixture("grub/pve-zfs-grub-cmdline-linux-root-zfs-intel.txt")
    after = edit_grub_default(text, WANT)
    assert 'GRUB_CMDLINE_LINUX_DEFAULT="quiet iommu=pt"' in after  # intel_iommu=on is already on the other line


@pytest.mark.parametrize("name", sorted(p.name for p in (FIX / "kernel-cmdline").glob("etc-kernel-cmdline-*.txt")))
def test_kernel_cmdline_edit_keeps_every_token(name):
    before = fixture(f"kernel-cmdline/{name}")
    tokens = parse_kernel_cmdline_file(before)
    new = edit_tokens(tokens, ["iommu=pt", "amd_iommu=on"])
    assert [t for t in new if t in tokens] == tokens
    rendered = render_kernel_cmdline_file(new)
    assert rendered.count("\n") == 1, "systemd-boot's cmdline file must stay one line"
    assert parse_kernel_cmdline_file(rendered) == new


def test_kernel_cmdline_zfs_root_survives():
    tokens = parse_kernel_cmdline_file(fixture("kernel-cmdline/etc-kernel-cmdline-zfs-intel-iommu-pt.txt"))
    assert tokens[:2] == ["root=ZFS=rpool/ROOT/pve-1", "boot=zfs"]
    assert edit_tokens(tokens, WANT) == tokens, "already has both: nothing to change"


@pytest.mark.parametrize(
    ("name", "code", "loader", "esps"),
    [
        ("status-error-uuids-missing-reexec.txt", 2, "grub", 0),
        ("status-uefi-grub-single-esp.txt", 0, "grub-pbt", 1),
        ("status-uefi-two-esps-after-clean.txt", 0, "systemd-boot", 2),
        ("status-uefi-two-esps-warn-missing-uuid.txt", 0, "systemd-boot", 2),
    ],
)
def test_proxmox_boot_tool_status(name, code, loader, esps):
    info = parse_boot_tool_status(fixture(f"proxmox-boot-tool/{name}"), code, efi=True)
    assert info.loader == loader and len(info.esps) == esps
    if esps:
        assert info.booted_with == "uefi"


# ``enabled`` needs proof: group assignments or an IOMMU brought up. "DMAR: IOMMU enabled" only echoes
# intel_iommu=on and "Default domain type" is printed either way, so those logs say nothing (None).
@pytest.mark.parametrize(
    ("name", "domain", "unknown", "enabled"),
    [
        ("intel-dmar-enabled-passthrough-vfio-rtx3090.txt", "Passthrough", (), True),
        ("pve-intel-grep-iommu-passthrough-cmdline.txt", "Passthrough", (), True),
        ("default-domain-translated-lazy.txt", "Translated", (), None),
        ("pve-amd-unknown-option-on-acs-override.txt", None, ("on",), True),
        ("amd-vi-unknown-option-on-virtual-apic.txt", None, ("on",), True),
        ("pve-intel-grep-iommu-dmar-enabled-6.8.txt", None, (), None),
    ],
)
def test_dmesg_iommu(name, domain, unknown, enabled):
    state = parse_dmesg_iommu(fixture(f"dmesg/{name}"))
    assert state.default_domain == domain
    assert state.unknown_options == unknown
    assert state.enabled is enabled


def test_lspci_h100_sxm_are_gpus():
    gpus = nvidia_gpus(parse_lspci_nn(fixture("lspci/nn-grep-nvidia-4x-h100-sxm5.txt")))
    assert len(gpus) == 4
    assert {(g.vendor, g.device, g.class_code) for g in gpus} == {("10de", "2330", "0302")}
    assert all(g.bdf.startswith("0000:") for g in gpus)


def test_lspci_nnk_reads_bound_driver():
    devices = parse_lspci_nn(fixture("lspci/nnk-h100-pcie-vfio-pci.txt"))
    assert any(d.driver == "vfio-pci" for d in nvidia_gpus(devices))
    devices = parse_lspci_nn(fixture("lspci/nnk-gtx1650-mobile-nvidia-driver.txt"))
    assert [d.driver for d in nvidia_gpus(devices)] == ["nvidia"]


def test_lspci_audio_functions_are_not_gpus():
    devices = parse_lspci_nn(fixture("lspci/pve-amd-rtx4070-nn-grep-nvidia.txt"))
    assert len(devices) == 2 and len(nvidia_gpus(devices)) == 1


@pytest.mark.parametrize(
    ("name", "version", "is_open"),
    [
        ("proc-driver-nvidia-version-open-565-ubuntu.txt", "565.57.01", True),
        ("proc-driver-nvidia-version-open-525-arch-trailing-spaces.txt", "525.60.11", True),
        ("proc-driver-nvidia-version-proprietary-384-trailing-space.txt", "384.98", False),
    ],
)
def test_nvidia_version(name, version, is_open):
    mod = parse_nvidia_version(fixture(f"nvidia/{name}"))
    assert (mod.version, mod.open) == (version, is_open)


def test_proc_devices_does_not_confuse_caps_with_imex_channels():
    majors = parse_proc_devices(fixture("nvidia/proc-devices-excerpt-caps-and-imex-channels.txt"))
    assert majors["nvidia-caps"] == 511
    assert majors["nvidia-caps-imex-channels"] == 234


def test_proc_devices_without_uvm():
    majors = parse_proc_devices(fixture("nvidia/proc-devices-nvidia-lines-open-rtx5060-no-uvm.txt"))
    assert majors["nvidia"] == 195 and "nvidia-uvm" not in majors
