"""Pure parts of the LXC operations, on real captured outputs where the input is an output."""

from pathlib import Path

import pytest

from gpuhost.checks.container import explain_nvidia_smi_failure
from gpuhost.errors import OperationFailed
from gpuhost.facts.hardware import parse_proc_devices
from gpuhost.facts.nvidia import parse_nvml_library_versions
from gpuhost.facts.pve import parse_pveversion
from gpuhost.operations.lxc import dev_entries, device_major, legacy_lines, pick_template

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "host"


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("pveversion-pve7-4-dash-release-short-hash.txt", (7, 4, 3)),
        ("pveversion-pve8-0-3.txt", (8, 0, 3)),
        ("pveversion-pve8-2-4.txt", (8, 2, 4)),
        ("pveversion-pve9-1-6-kernel-6-17.txt", (9, 1, 6)),
    ],
)
def test_parse_pveversion(name, version):
    v = parse_pveversion((FIX / "pveversion" / name).read_text())
    assert (v.major, v.minor, v.patch) == version


def test_devn_needs_pve_8_1():
    assert not parse_pveversion("pve-manager/8.0.3/bbf3993334bfa916").at_least(8, 1)
    assert parse_pveversion("pve-manager/8.2.4/faa83925c9641325").at_least(8, 1)


def test_dev_entries_are_numbered_with_the_gid():
    assert dev_entries(["/dev/nvidia0", "/dev/nvidiactl"], 44) == {
        "dev0": "/dev/nvidia0,gid=44",
        "dev1": "/dev/nvidiactl,gid=44",
    }


def test_legacy_lines_take_majors_from_proc_devices():
    majors = parse_proc_devices(
        (FIX / "nvidia" / "ls-dev-nvidia-and-proc-devices-l4-uvm-510.txt").read_text().split("grep -E")[0]
        + "\n195 nvidia\n510 nvidia-uvm\n"
    )
    lines = legacy_lines(["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"], majors)
    assert ("lxc.cgroup2.devices.allow", "c 195:* rwm") in lines
    assert ("lxc.cgroup2.devices.allow", "c 510:* rwm") in lines
    assert ("lxc.mount.entry", "/dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file") in lines


def test_caps_major_is_not_confused_with_imex_channels():
    majors = parse_proc_devices((FIX / "nvidia" / "proc-devices-excerpt-caps-and-imex-channels.txt").read_text())
    assert device_major("/dev/nvidia-caps/nvidia-cap1", majors) == 511


def test_missing_uvm_major_is_a_clear_error():
    majors = parse_proc_devices((FIX / "nvidia" / "proc-devices-nvidia-lines-open-rtx5060-no-uvm.txt").read_text())
    with pytest.raises(OperationFailed, match="no 'nvidia-uvm' major"):
        device_major("/dev/nvidia-uvm", majors)


def test_explain_version_mismatch_from_real_output():
    text = (FIX / "nvidia" / "nvidia-smi-version-mismatch-with-proc-version-580.txt").read_text()
    msg = " ".join(explain_nvidia_smi_failure(text))
    assert "version mismatch" in msg and "(580.178)" in msg and "--no-kernel-modules" in msg


def test_explain_no_driver_communication_from_real_output():
    text = (FIX / "nvidia" / "nvidia-smi-failed-communicate-single-line.txt").read_text()
    assert "device nodes are not passed through" in explain_nvidia_smi_failure(text)[0]


def test_nvml_library_versions_from_a_listing():
    listing = (
        "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so\n/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\n"
        "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.95.05\n"
    )
    assert parse_nvml_library_versions(listing) == ["580.95.05"]
    assert parse_nvml_library_versions("") == []


def test_pick_template_prefers_newest_debian_12():
    vols = [
        "local:vztmpl/alpine-3.19-default_20240207_amd64.tar.xz",
        "local:vztmpl/debian-12-standard_12.2-1_amd64.tar.zst",
        "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst",
    ]
    assert pick_template(vols) == "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"
    assert pick_template([]) is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("memory", 32),
        ("cores", 0),
        ("swap", -1),
        ("rootfs", "../x:1"),
        ("net0", "bridge=vmbr0,mtu=9000 x"),
        ("features", "x"),
    ],
)
def test_the_inventory_and_the_lxc_container_operation_refuse_the_same_values(field: str, value: object) -> None:
    from pydantic import ValidationError

    from gpuhost.inventory.models import ContainerSpec
    from gpuhost.operations.lxc import ContainerArgs

    with pytest.raises(ValidationError) as spec:
        ContainerSpec.model_validate({field: value})
    with pytest.raises(ValidationError) as args:
        ContainerArgs.model_validate({"ctid": 200, "hostname": "gpu200", field: value})
    assert [e["msg"] for e in spec.value.errors()] == [e["msg"] for e in args.value.errors()]
