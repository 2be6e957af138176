"""Planning of guest-config edits with PVE's semantics: digests, pending values, foreign devices, the diff."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gpuhost.core.actions import EditGuestConfig, PveCall
from gpuhost.core.guest import Guest
from gpuhost.errors import OperationFailed
from gpuhost.facts.boot import BootInfo
from gpuhost.facts.hardware import IommuState
from gpuhost.facts.host import HostFacts, host_facts
from gpuhost.facts.pve import PveVersion, ct_config, ct_status, node_name, pve_version
from gpuhost.operations.lxc import ContainerArgs, DevicesArgs, LxcContainer, LxcDevices
from gpuhost.pve import config as pveconf
from gpuhost.pve import edit

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "pve" / "lxc"
GPUS = ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm"]


def host_facts_with(devices: list[str]) -> HostFacts:
    return HostFacts(
        cpu_vendor="amd",
        kernel="6.8.12-4-pve",
        pve_version=None,
        boot=BootInfo("systemd-boot", True, "uefi", ("7D41-3B3A",)),
        grub_effective_tokens=None,
        kernel_cmdline_tokens=None,
        booted_tokens=(),
        iommu=IommuState(None, True, ()),
        iommu_groups={},
        gpus=(),
        modules=frozenset(),
        nvidia=None,
        nvidia_installed=None,
        char_majors={"nvidia": 195, "nvidia-uvm": 511},
        nvidia_devices=tuple(devices),
    )


@dataclass
class Host:
    """A HostContext with parsed facts (the scenario suite's ScenarioHost does the same from captures)."""

    conf: str | None
    status: str | None = "running"
    version: PveVersion = PveVersion(8, 2, 4)
    check: bool = False
    name: str = "pve1"
    vars: Mapping[str, Any] = field(default_factory=dict)
    reboot_pending: bool = False

    def restart_pending(self, guest: Guest) -> bool:
        return False

    def fact(self, fact: Any, *args: Any) -> Any:
        if fact is ct_config:
            return None if self.conf is None else pveconf.parse(self.conf, "lxc")
        values = {
            ct_status: self.status,
            pve_version: self.version,
            node_name: "pve1",
            host_facts: host_facts_with(GPUS + ["/dev/nvidia-uvm-tools"]),
        }
        return values[fact]

    def guest(self, guest: Guest) -> Any:
        raise AssertionError("not used")

    def render_template(self, name: str, extra: Mapping[str, Any] | None = None) -> str:
        raise AssertionError("not used")


BASE = [
    "arch: amd64",
    "hostname: gpu200",
    "memory: 65536",
    "ostype: debian",
    "rootfs: local-lvm:vm-200-disk-0,size=64G",
]


def conf_with(*lines: str, pending: list[str] | None = None) -> str:
    """A config as PVE writes it: options sorted by key, then the raw lxc.* lines."""
    main = "".join(f"{line}\n" for line in sorted(BASE + [x for x in lines if not x.startswith("lxc.")]))
    main += "".join(f"{line}\n" for line in lines if line.startswith("lxc."))
    if pending:
        main += "\n[pve:pending]\n" + "".join(f"{line}\n" for line in pending)
    return main


def devices(*paths: str, memlock: bool = False) -> LxcDevices:
    return LxcDevices(DevicesArgs(ctid=200, devices=list(paths), memlock_unlimited=memlock))


def calls(plan: Any) -> list[PveCall]:
    return [a for a in plan.actions if isinstance(a, PveCall)]


def test_put_carries_the_digest_of_the_config_it_was_planned_from():
    text = conf_with("dev0: /dev/nvidia0,gid=44")
    plan = devices("/dev/nvidia0", "/dev/nvidiactl").plan(Host(text))
    (call,) = calls(plan)
    assert call.digest == pveconf.digest_of(text)
    assert call.params == (("dev1", "/dev/nvidiactl,gid=44"),)


def test_foreign_device_keeps_its_index_and_gpus_take_free_ones():
    text = conf_with("dev0: /dev/dri/card0,gid=44", "dev1: /dev/nvidia0,gid=44")
    plan = devices(*GPUS).plan(Host(text))
    (call,) = calls(plan)
    assert dict(call.params) == {
        "dev2": "/dev/nvidia1,gid=44",
        "dev3": "/dev/nvidiactl,gid=44",
        "dev4": "/dev/nvidia-uvm,gid=44",
    }
    assert "kept dev0=/dev/dri/card0" in plan.reason


def test_unwanted_nvidia_entries_go_and_foreign_ones_stay():
    text = conf_with("dev0: /dev/dri/card0", "dev1: /dev/nvidia0,gid=44", "dev2: /dev/nvidia3,gid=44")
    (call,) = calls(devices("/dev/nvidia0").plan(Host(text, status="stopped")))
    assert call.params == (("delete", "dev2"),)


def test_pending_delete_of_a_wanted_gpu_is_drift_and_repaired():
    # after `pct set 200 --delete dev1` on the running CT
    text = conf_with("dev0: /dev/nvidia0,gid=44", "dev1: /dev/nvidia1,gid=44", pending=["delete: dev1"])
    plan = devices("/dev/nvidia0", "/dev/nvidia1").plan(Host(text))
    (call,) = calls(plan)
    assert call.params == (("dev1", "/dev/nvidia1,gid=44"),)
    assert "-delete: dev1" in plan.diff  # the fix cancels the queued deletion
    assert "[pve:pending]" not in edit.apply_params(pveconf.parse(text, "lxc"), call.params, running=True).text()


def test_pending_value_equal_to_wanted_is_ok_waiting_for_restart():
    text = conf_with("dev0: /dev/nvidia0,gid=44", "dev1: /dev/nvidia5,gid=44", pending=["dev1: /dev/nvidia1,gid=44"])
    plan = devices("/dev/nvidia0", "/dev/nvidia1").plan(Host(text))
    assert not plan.changes
    assert plan.waiting == (Guest.ct(200),)
    assert "waiting for restart" in plan.reason and "dev1" in plan.reason


def test_pending_value_on_a_stopped_ct_waits_for_its_start_without_a_restart():
    text = conf_with("dev0: /dev/nvidia5,gid=44", pending=["dev0: /dev/nvidia0,gid=44"])
    plan = devices("/dev/nvidia0").plan(Host(text, status="stopped"))
    assert not plan.changes and plan.waiting == ()
    assert "applies at its next start" in plan.reason


def test_pending_other_value_of_a_wanted_key_is_drift():
    text = conf_with("dev0: /dev/nvidia0,gid=44", pending=["dev0: /dev/nvidia0,gid=0"])
    (call,) = calls(devices("/dev/nvidia0").plan(Host(text)))
    assert call.params == (("dev0", "/dev/nvidia0,gid=44"),)


def test_removing_a_staged_gpu_entry_reverts_it():
    text = conf_with("dev0: /dev/nvidia0,gid=44", pending=["dev1: /dev/nvidia7,gid=44"])
    (call,) = calls(devices("/dev/nvidia0").plan(Host(text)))
    assert call.params == (("revert", "dev1"),)


def test_diff_shows_the_api_change_as_pve_applies_it_on_a_running_ct():
    text = conf_with("dev0: /dev/nvidia5,gid=44")
    plan = devices("/dev/nvidia0").plan(Host(text))
    assert calls(plan)[0].params == (("dev1", "/dev/nvidia0,gid=44"), ("delete", "dev0"))
    # a new devN hot-plugs into the running CT; the deletion of an existing one waits as pending
    assert "+dev1: /dev/nvidia0,gid=44\n" in plan.diff
    assert plan.diff.endswith("+\n+[pve:pending]\n+delete: dev0\n")
    stopped = devices("/dev/nvidia0").plan(Host(text, status="stopped"))
    assert "-dev0: /dev/nvidia5,gid=44\n+dev1: /dev/nvidia0,gid=44\n" in stopped.diff
    assert "pending" not in stopped.diff


def test_pve81_drops_gpuhosts_old_raw_lines_keeps_foreign_ones():
    text = (FIX / "116-nvidia-raw-lxc-keys.conf").read_text()
    wanted = ["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
    plan = devices(*wanted, memlock=True).plan(Host(text))
    edit_action = next(a for a in plan.actions if isinstance(a, EditGuestConfig))
    after = edit_action.content
    assert "lxc.mount.entry: /dev/nvidia0 dev/nvidia0" not in after
    assert "lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm " not in after
    assert "lxc.mount.entry: /dev/nvidia-modeset dev/nvidia-modeset" in after  # not one gpuhost passes
    assert "lxc.cgroup2.devices.allow: c 195:* rwm" in after  # the modeset mount still needs 195
    assert "lxc.cgroup2.devices.allow: c 511:* rwm" not in after  # uvm's major: no mount of it is left
    assert "lxc.cgroup2.devices.allow: c 236:* rwm" in after  # not an NVIDIA major on this host
    assert "lxc.cgroup2.devices.allow: a\n" in after and "lxc.apparmor.profile: unconfined" in after
    assert edit_action.digest == pveconf.digest_of(text)
    assert edit_action.lock == "/run/lock/lxc/pve-config-200.lock"
    (call,) = calls(plan)
    assert call.digest == pveconf.digest_of(after)  # the PUT follows the file edit


def test_legacy_user_bind_mount_of_the_same_node_is_kept_not_doubled():
    text = conf_with("lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,create=file 0 0")
    plan = devices("/dev/nvidia0", memlock=False).plan(Host(text, version=PveVersion(8, 0, 3)))
    content = next(a for a in plan.actions if isinstance(a, EditGuestConfig)).content
    assert content.count("dev/nvidia0 none") == 1


def test_legacy_bind_mount_from_another_source_on_the_target_is_a_conflict_with_the_fix():
    text = conf_with("lxc.mount.entry: /opt/fake-nvidia0 dev/nvidia0 none bind,create=file")
    with pytest.raises(OperationFailed) as info:
        devices("/dev/nvidia0").plan(Host(text, version=PveVersion(8, 0, 3)))
    line = text.split("\n").index("lxc.mount.entry: /opt/fake-nvidia0 dev/nvidia0 none bind,create=file") + 1
    assert f"/etc/pve/lxc/200.conf:{line}: lxc.mount.entry mounts /opt/fake-nvidia0 on dev/nvidia0" in str(info.value)
    assert "remove that line" in str(info.value)


def test_memlock_of_another_value_is_changed_in_place():
    text = conf_with("dev0: /dev/nvidia0,gid=44", "lxc.prlimit.memlock: 65536")
    content = next(a for a in devices("/dev/nvidia0", memlock=True).plan(Host(text)).actions).content  # type: ignore[union-attr]
    assert content.count("lxc.prlimit.memlock") == 1 and "lxc.prlimit.memlock: unlimited" in content


def container(**kw: Any) -> LxcContainer:
    args = {"ctid": 200, "hostname": "gpu200", "cores": 8, "memory": 65536, "swap": 0, "onboot": False, **kw}
    return LxcContainer(ContainerArgs(**args))


def test_missing_onboot_is_pves_default_zero_not_a_change():
    text = conf_with("cores: 8", "swap: 0")
    assert not container(onboot=False).plan(Host(text)).changes


def test_container_change_has_digest_and_a_diff():
    text = conf_with("cores: 4", "swap: 0")
    plan = container().plan(Host(text))
    (call,) = calls(plan)
    assert call.params == (("cores", "8"),) and call.digest == pveconf.digest_of(text)
    assert "-cores: 4\n+cores: 8\n" in plan.diff  # cores hot-plugs: straight into the main section
