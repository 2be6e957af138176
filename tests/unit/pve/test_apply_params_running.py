"""What ``PUT /nodes/N/lxc/ID/config`` leaves on a running container, as pve-container's ``update_pct_config`` and
``vmconfig_hotplug_pending`` decide (PVE/LXC/Config.pm; shared reference proxmox-behaviour-2026-12.md): the
fast-plug options and the hot-pluggable ones apply at once, a new mount point or device is hot-plugged, anything
else waits in ``[pve:pending]`` until the next start. A stopped container takes everything at once."""

from __future__ import annotations

from gpuhost.pve import config as pveconf
from gpuhost.pve import edit

RUNNING = "arch: amd64\nhostname: llm\nmemory: 512\nswap: 512\ncores: 4\nmp0: local-lvm:vm-200-disk-1,mp=/data\ndev0: /dev/nvidia0,gid=44\nunused0: local-lvm:vm-200-disk-2\n"


def after(params: list[tuple[str, str]], running: bool = True) -> pveconf.GuestConfig:
    return edit.apply_params(pveconf.parse(RUNNING, "lxc"), params, running=running)


def pending(conf: pveconf.GuestConfig) -> dict[str, str]:
    return dict(conf.pending.options) if conf.pending is not None else {}


def test_hot_pluggable_values_apply_at_once() -> None:
    conf = after([("memory", "65536"), ("swap", "0"), ("cores", "16"), ("hostname", "gpu")])
    assert (conf.get("memory"), conf.get("swap"), conf.get("cores"), conf.get("hostname")) == (
        "65536",
        "0",
        "16",
        "gpu",
    )
    assert pending(conf) == {}


def test_a_new_device_is_hot_plugged_a_changed_one_waits() -> None:
    conf = after([("dev1", "/dev/nvidiactl,gid=44")])
    assert conf.get("dev1") == "/dev/nvidiactl,gid=44" and pending(conf) == {}
    changed = after([("dev0", "/dev/nvidia1,gid=44")])
    assert changed.get("dev0") == "/dev/nvidia0,gid=44"
    assert pending(changed) == {"dev0": "/dev/nvidia1,gid=44"}


def test_other_keys_wait_for_the_next_start() -> None:
    conf = after([("features", "nesting=1"), ("mp0", "local-lvm:vm-200-disk-3,mp=/data")])
    assert conf.get("features") is None and conf.get("mp0") == "local-lvm:vm-200-disk-1,mp=/data"
    assert pending(conf) == {"features": "nesting=1", "mp0": "local-lvm:vm-200-disk-3,mp=/data"}


def test_deletions_of_hot_pluggable_keys_apply_others_wait() -> None:
    conf = after([("delete", "swap,unused0,mp0,dev0")])
    assert conf.get("swap") is None and conf.get("unused0") is None
    assert conf.get("mp0") is not None and conf.get("dev0") is not None
    assert sorted(conf.pending_deletes()) == ["dev0", "mp0"]


def test_a_stopped_container_takes_everything_at_once() -> None:
    conf = after([("features", "nesting=1"), ("dev0", "/dev/nvidia1,gid=44"), ("delete", "mp0")], running=False)
    assert conf.get("features") == "nesting=1" and conf.get("dev0") == "/dev/nvidia1,gid=44" and conf.get("mp0") is None
    assert pending(conf) == {} and list(conf.pending_deletes()) == []


def test_a_revert_drops_a_pending_value_and_drift_lists_both_reverted_keys() -> None:
    text = RUNNING + "\n[pve:pending]\nfeatures: nesting=1\nmp0: local-lvm:vm-200-disk-3,mp=/data\n"
    conf = pveconf.parse(text, "lxc")
    d = edit.drift(conf, {"features": None, "mp0": None})
    # PVE refuses revert=K with delete=K in one call (400): revert first, delete in a second call
    assert d.calls() == [(("revert", "features,mp0"),), (("delete", "mp0"),)]
    out = edit.apply_params(conf, [("revert", "features,mp0")], running=True)
    assert pending(out) == {}


def test_deletions_are_split_as_pves_configid_list_and_a_forced_one_is_kept_forced() -> None:
    conf = after([("delete", "swap;unused0 !mp0")])
    assert conf.get("swap") is None and conf.get("unused0") is None
    assert "delete: !mp0" in conf.text()  # waits, forced, for the next start
    stopped = after([("delete", "!mp0")], running=False)
    assert stopped.get("mp0") is None and "[pve:pending]" not in stopped.text()


def test_deleting_a_key_that_is_not_set_is_ignored_as_pve_does() -> None:
    conf = after([("delete", "mp5")])
    assert list(conf.pending_deletes()) == [] and conf.text() == pveconf.parse(RUNNING, "lxc").text()


def test_a_pending_value_equal_to_the_current_one_is_dropped() -> None:
    text = RUNNING + "\n[pve:pending]\nfeatures: nesting=1\n"
    out = edit.apply_params(pveconf.parse(text, "lxc"), [("memory", "512"), ("digest", "abc")], running=True)
    assert pending(out) == {"features": "nesting=1"} and out.get("memory") == "512"
    assert "digest" not in out.text()


def test_what_a_guest_will_have_after_its_next_start() -> None:
    text = RUNNING + "\n[pve:pending]\nmemory: 2048\ndelete: swap,!mp0\n"
    conf = pveconf.parse(text, "lxc")
    after = edit.effective(conf)
    assert after["memory"] == "2048" and "swap" not in after and "mp0" not in after
    assert after["hostname"] == "llm" and after["dev0"] == "/dev/nvidia0,gid=44"  # main values stay
    assert "delete" not in after  # the pending section's delete list is not an option of the guest
    assert edit.pending_value(conf, "delete") is None and edit.pending_value(conf, "memory") == "2048"
