"""What gpuhost says when another writer changed a guest config under it: PVE's refusal recognised, the config's
file named, and each changed key listed as ``[section] key: old → new`` (scenario configs written by hand)."""

from __future__ import annotations

from gpuhost.pve import config as pveconf
from gpuhost.pve import edit

BEFORE = """arch: amd64
hostname: llm
memory: 512
dev0: /dev/nvidia0,gid=44
lxc.cgroup2.devices.allow: c 195:* rwm

[snap1]
memory: 256
"""


def test_each_key_another_writer_changed_is_listed_with_its_section() -> None:
    after = """arch: amd64
hostname: llm
memory: 2048
dev1: /dev/nvidiactl,gid=44
lxc.cgroup2.devices.allow: c 195:* rwm
lxc.cgroup2.devices.allow: c 509:* rwm

[snap1]
memory: 128
"""
    changed = edit.what_changed(pveconf.parse(BEFORE, "lxc"), pveconf.parse(after, "lxc"))
    assert changed == [
        "dev0: /dev/nvidia0,gid=44 → (unset)",
        "dev1: (unset) → /dev/nvidiactl,gid=44",
        "lxc.cgroup2.devices.allow: c 195:* rwm → c 195:* rwm, c 509:* rwm",
        "memory: 512 → 2048",
        "[snap1] memory: 256 → 128",
    ]


def test_a_description_change_counts_and_nothing_changed_lists_nothing() -> None:
    same = pveconf.parse(BEFORE, "lxc")
    assert edit.what_changed(same, pveconf.parse(BEFORE, "lxc")) == []
    described = pveconf.parse("#GPU container\n" + BEFORE, "lxc")
    assert edit.what_changed(same, described) == ["description: (unset) → GPU container"]


def test_pves_refusal_is_recognised() -> None:
    assert edit.is_modified_error("500 detected modified configuration - file changed by other user? Try again.")
    assert edit.is_modified_error(edit.MODIFIED)
    assert not edit.is_modified_error("500 unable to parse value of 'memory'")


def test_the_config_file_of_an_api_path() -> None:
    assert edit.config_of_api_path("nodes/pve1/lxc/200/config") == ("lxc", 200)
    assert edit.config_of_api_path("/nodes/pve-2/qemu/100/config") == ("qemu", 100)
    for other in ("nodes/pve1/lxc/200/status/start", "nodes/pve1/lxc/x/config", "cluster/config"):
        assert edit.config_of_api_path(other) is None
    assert edit.config_file("lxc", 200) == "/etc/pve/lxc/200.conf"
    assert edit.config_file("qemu", 100) == "/etc/pve/qemu-server/100.conf"


def test_the_lock_files_pve_takes() -> None:
    assert edit.lock_path("lxc", 200) == "/run/lock/lxc/pve-config-200.lock"
    assert edit.lock_path("qemu", 100) == "/var/lock/qemu-server/lock-100.conf"
