"""Issue 13 defects in host facts, on real captures (tests/fixtures/host/SOURCE.md): each failed before the fix."""

from pathlib import Path

import pytest

from gpuhost.facts import hardware
from gpuhost.facts.cmdline import edit_tokens, missing_tokens
from gpuhost.facts.hardware import parse_dmesg_iommu, parse_proc_devices
from gpuhost.operations.lxc import device_major, legacy_lines

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "host"


def fixture(rel: str) -> str:
    return (FIX / rel).read_text()


def explain_driver_failure(output: str, **kw: str):  # type: ignore[no-untyped-def]
    from gpuhost.facts.driver_failure import explain_driver_failure as explain

    return explain(output, **kw)


def parse_device_numbers(text: str, directory: str = "") -> dict[str, tuple[int, int]]:
    return hardware.parse_device_numbers(text, directory)


# -- driver failures ------------------------------------------------------------------------


def test_mismatch_on_a_bare_metal_host_does_not_blame_a_container() -> None:
    r = explain_driver_failure(fixture("nvidia/host-nvidia-smi-version-mismatch-570-p2p-modules.txt"), where="host")
    assert "container" not in r.message and "reboot" in r.fix and "(570.124)" in r.message


def test_mismatch_in_lxd_and_docker_names_the_container_and_its_fix() -> None:
    lxd = explain_driver_failure(fixture("nvidia/lxd-nvidia-smi-version-mismatch.txt"), where="lxd")
    assert "container's NVIDIA userspace" in lxd.message and "--no-kernel-modules" in lxd.fix
    docker = explain_driver_failure(fixture("nvidia/docker-nvidia-smi-version-mismatch-565.txt"), where="docker")
    assert "image's NVIDIA userspace" in docker.message and "--gpus all" in docker.fix


def test_library_and_module_versions_are_side_by_side() -> None:
    r = explain_driver_failure(fixture("nvidia/nvidia-smi-version-mismatch-with-proc-version-580.txt"), where="host")
    assert "NVML library (580.178), kernel module (580.173.02)" in r.message
    assert (r.library_version, r.module_version) == ("580.178", "580.173.02")


def test_docker_load_library_signature_is_recognised() -> None:
    r = explain_driver_failure(fixture("nvidia/docker-nvidia-container-cli-load-library-failed.txt"))
    assert (r.kind, r.where) == ("runtime-no-library", "docker") and "nvidia-ctk" in r.fix


@pytest.mark.parametrize(
    ("name", "where", "expect"),
    [
        ("nvidia-smi-failed-communicate-single-line.txt", "host", "modprobe nvidia"),
        ("lxd-juju-unable-to-communicate.txt", "lxd", "device nodes"),
    ],
)
def test_no_driver_advice_depends_on_where(name: str, where: str, expect: str) -> None:
    r = explain_driver_failure(fixture(f"nvidia/{name}"), where=where)
    assert r.kind == "no-driver" and expect in str(r)


# -- dmesg IOMMU ----------------------------------------------------------------------------


def test_amd_host_with_perf_counters_and_groups_reads_enabled() -> None:
    s = parse_dmesg_iommu(fixture("dmesg/amd-perf-counters-and-iommu-groups-excerpt.txt"))
    assert s.enabled is True and s.vendor == "amd" and s.groups == 12


def test_amd_units_and_interrupt_remapping() -> None:
    s = parse_dmesg_iommu(fixture("dmesg/amd-epyc-found-iommu-interrupt-remapping-excerpt.txt"))
    assert (s.enabled, s.units, s.irq_remapping) == (True, 4, True)


def test_intel_dmar_iommu_enabled_line_alone_proves_nothing() -> None:
    assert parse_dmesg_iommu(fixture("dmesg/pve-intel-grep-iommu-dmar-enabled-6.8.txt")).enabled is None
    assert parse_dmesg_iommu(fixture("dmesg/default-domain-translated-lazy.txt")).enabled is None


def test_intel_drhd_units_and_irq_remapping() -> None:
    s = parse_dmesg_iommu(fixture("dmesg/intel-grep-dmar-drhd-sapphire-rapids-excerpt.txt"))
    assert (s.vendor, s.units) == ("intel", 2)
    for name in ("intel-dmar-ir-x2apic-excerpt.txt", "intel-dmar-ir-xapic-bios-optout-excerpt.txt"):
        assert parse_dmesg_iommu(fixture(f"dmesg/{name}")).irq_remapping is True


# -- command-line edits and device majors ---------------------------------------------------


def test_wanted_token_keeps_existing_sub_options() -> None:
    assert edit_tokens(["quiet", "intel_iommu=on,igfx_off"], ["intel_iommu=on"]) == ["quiet", "intel_iommu=on,igfx_off"]
    assert edit_tokens(["intel_iommu=off,igfx_off"], ["intel_iommu=on"]) == ["intel_iommu=on,igfx_off"]
    assert missing_tokens(["intel_iommu=on,igfx_off"], ["intel_iommu=on", "iommu=pt"]) == ["iommu=pt"]


def test_imex_channel_does_not_get_the_nvidia_caps_major() -> None:
    majors = parse_proc_devices(fixture("nvidia/proc-devices-excerpt-caps-and-imex-channels.txt"))
    assert device_major("/dev/nvidia-caps-imex-channels/channel0", majors) == 234
    assert device_major("/dev/nvidia-caps/nvidia-cap1", majors) == 511


def test_majors_come_from_each_node_not_its_name() -> None:
    numbers = parse_device_numbers(fixture("nvidia/ls-la-dev-nvidia-caps.txt"), "/dev/nvidia-caps")
    assert numbers["/dev/nvidia-caps/nvidia-cap4323"] == (234, 4323)
    majors = {"nvidia-caps": 511}
    assert device_major("/dev/nvidia-caps/nvidia-cap4323", majors, numbers) == 234
    lines = legacy_lines(["/dev/nvidia-caps/nvidia-cap1", "/dev/nvidia-caps/nvidia-cap4323"], majors, numbers)
    allowed = [value for key, value in lines if key == "lxc.cgroup2.devices.allow"]
    assert allowed == ["c 234:* rwm", "c 511:* rwm"]


def test_stat_output_is_read_in_hex() -> None:
    # the format of `stat -c '%n %t %T'` (major and minor in hex), as host_facts runs it
    assert parse_device_numbers("/dev/nvidia-uvm 1fe 0\n/dev/nvidia0 c3 0\n") == {
        "/dev/nvidia-uvm": (510, 0),
        "/dev/nvidia0": (195, 0),
    }
