"""Which /proc/devices major owns a node, the pre-8.1 lines gpuhost writes, and how devN indexes are chosen, from
scenarios. Majors are the real ones of ``ls-dev-nvidia-and-proc-devices-l4-uvm-510.txt`` (tests/fixtures/host:
nvidia 195, nvidia-uvm 510) plus the nvswitch and caps majors of a fabric host written for the test."""

from __future__ import annotations

import pytest

from gpuhost.errors import OperationFailed
from gpuhost.operations.lxc import _mount_target, device_major, device_targets, legacy_lines, pick_template
from gpuhost.pve import config as pveconf

MAJORS = {
    "nvidia": 195,
    "nvidia-uvm": 510,
    "nvidia-nvswitch": 241,
    "nvidia-caps": 236,
    "nvidia-caps-imex-channels": 234,
}


@pytest.mark.parametrize(
    "node, major",
    [
        ("/dev/nvidia0", 195),
        ("/dev/nvidiactl", 195),
        ("/dev/nvidia-uvm", 510),
        ("/dev/nvidia-uvm-tools", 510),
        ("/dev/nvidia-nvswitch0", 241),
        ("/dev/nvidia-nvswitchctl", 241),
        ("/dev/nvidia-caps/nvidia-cap1", 236),
        ("/dev/nvidia-caps-imex-channels/channel0", 234),
    ],
)
def test_the_major_of_each_node_comes_from_its_driver(node: str, major: int) -> None:
    assert device_major(node, MAJORS) == major


def test_a_node_s_own_numbers_win_and_a_missing_driver_is_named() -> None:
    assert device_major("/dev/nvidia-uvm", MAJORS, {"/dev/nvidia-uvm": (509, 0)}) == 509
    assert device_major("/dev/nvidia-uvm", MAJORS, {"/dev/nvidia0": (195, 0)}) == 510
    with pytest.raises(OperationFailed, match="^/proc/devices lists no 'nvidia-uvm' major: load the NVIDIA"):
        device_major("/dev/nvidia-uvm", {"nvidia": 195})


def test_legacy_lines_one_allow_per_major_and_a_bind_mount_per_node() -> None:
    nodes = ["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"]
    assert legacy_lines(nodes, MAJORS, {"/dev/nvidia-uvm": (508, 0)}) == [
        ("lxc.cgroup2.devices.allow", "c 195:* rwm"),
        ("lxc.cgroup2.devices.allow", "c 508:* rwm"),
        ("lxc.mount.entry", "/dev/nvidia0 dev/nvidia0 none bind,optional,create=file"),
        ("lxc.mount.entry", "/dev/nvidiactl dev/nvidiactl none bind,optional,create=file"),
        ("lxc.mount.entry", "/dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file"),
    ]
    with pytest.raises(OperationFailed):
        legacy_lines(nodes, {"nvidia": 195})
    lenient = legacy_lines(nodes, {"nvidia": 195}, strict=False)
    assert [v for k, v in lenient if k == "lxc.cgroup2.devices.allow"] == ["c 195:* rwm"]


def test_mount_entry_source_and_target() -> None:
    assert _mount_target("/dev/nvidia0 dev/nvidia0 none bind,optional,create=file") == ("/dev/nvidia0", "dev/nvidia0")
    assert _mount_target("/dev/nvidia0 /dev/nvidia0/ none bind") == ("/dev/nvidia0", "dev/nvidia0")
    assert _mount_target("/dev/nvidia0 dev/nvidia0") == ("/dev/nvidia0", "dev/nvidia0")
    assert _mount_target("lonely") == ("lonely", "")


def conf(*lines: str) -> pveconf.GuestConfig:
    return pveconf.parse("arch: amd64\n" + "".join(line + "\n" for line in lines), "lxc")


def test_indexes_are_kept_ordered_numerically_and_free_ones_taken_lowest_first() -> None:
    c = conf(
        "dev0: /dev/dri/card0", "dev2: /dev/nvidia0,gid=44", "dev10: /dev/nvidia1,gid=44", "dev11: /dev/nvidia1,gid=44"
    )
    targets = device_targets(200, c, ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl"], 44)
    assert targets == {
        "dev2": "/dev/nvidia0,gid=44",
        "dev10": "/dev/nvidia1,gid=44",
        "dev11": None,  # the same node twice: the lower index keeps it
        "dev1": "/dev/nvidiactl,gid=44",
    }


def test_an_entry_queued_for_deletion_goes_back_to_its_index() -> None:
    c = conf("dev3: /dev/nvidia-uvm,gid=44", "dev4: /dev/nvidia9,gid=44", "", "[pve:pending]", "delete: dev3,dev4")
    assert device_targets(200, c, ["/dev/nvidia-uvm"], 44) == {"dev3": "/dev/nvidia-uvm,gid=44", "dev4": None}


def test_no_free_index_is_refused_naming_the_node() -> None:
    c = conf(*(f"dev{i}: /dev/dri/card{i}" for i in range(256)))
    with pytest.raises(OperationFailed) as exc:
        device_targets(200, c, ["/dev/nvidia0"], 44)
    assert str(exc.value) == "CT 200: no free devN index left for /dev/nvidia0 (PVE allows dev0..dev255)"


def test_the_newest_template_is_picked() -> None:
    vols = [
        "local:vztmpl/debian-12-standard_12.2-1_amd64.tar.zst",
        "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst",
        "local:vztmpl/debian-12-standard_12.0-1_amd64.tar.zst",
    ]
    assert pick_template(vols) == "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"
    assert pick_template([]) is None
