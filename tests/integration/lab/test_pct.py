"""pct: containers are real isolated environments; devN and raw lxc.* keys behave as in PVE."""

from __future__ import annotations

import itertools
from pathlib import Path

from gpuhost.pve.guest_lists import PctRow, pct_rows
from tests.lab_fixtures import LabHandle

CAPTURES = Path(__file__).resolve().parents[2] / "fixtures" / "cluster"

TEMPLATE = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"
_CTIDS = itertools.count(500)


def _new_ct(lab: LabHandle, node: str = "pve2", extra: str = "") -> int:
    ctid = next(_CTIDS)
    r = lab.run(
        node,
        f"pct create {ctid} {TEMPLATE} --hostname ct{ctid} --memory 2048 --rootfs local-lvm:8 --unprivileged 1 {extra}",
    )
    assert r.rc == 0, r.stderr
    return ctid


def test_create_writes_pve_config(lab: LabHandle) -> None:
    ctid = _new_ct(lab)
    assert lab.run("pve2", f"pct config {ctid}").stdout == (
        "arch: amd64\n"
        f"hostname: ct{ctid}\n"
        "memory: 2048\n"
        "ostype: debian\n"
        f"rootfs: local-lvm:vm-{ctid}-disk-0,size=8G\n"
        "swap: 512\n"
        "unprivileged: 1\n"
    )
    r = lab.run("pve2", "pct create 599 local:vztmpl/nope.tar.zst")
    assert (r.rc, r.stderr) == (255, "volume 'local:vztmpl/nope.tar.zst' does not exist\n")


def test_container_is_isolated_and_reachable_with_exec_push_pull(lab: LabHandle) -> None:
    ctid = _new_ct(lab)
    assert lab.run("pve2", f"pct start {ctid}").rc == 0
    assert lab.run("pve2", f"pct status {ctid}").stdout == "status: running\n"
    r = lab.run(
        "pve2",
        f"pct exec {ctid} -- sh -c 'hostname; ps -e -o comm= | grep -c sshd; test -e /etc/pve || echo no-pve; "
        "test -e /usr/sbin/qm || echo no-qm; echo inside > /root/made-inside'",
    )
    assert r.stdout.splitlines() == [f"ct{ctid}", "0", "no-pve", "no-qm"], r.stdout + r.stderr
    assert lab.run("pve2", "test -e /root/made-inside || echo node-clean").stdout == "node-clean\n"
    r = lab.run(
        "pve2",
        f"echo payload > /tmp/p && pct push {ctid} /tmp/p /root/p --perms 600 && "
        f"pct exec {ctid} -- stat -c '%a %s' /root/p && pct pull {ctid} /root/made-inside /tmp/back && "
        "cat /tmp/back",
    )
    assert r.stdout == "600 8\ninside\n", r.stderr
    assert lab.run("pve2", f"pct exec {ctid} -- sh -c 'exit 7'").rc == 7
    assert lab.run("pve2", f"pct stop {ctid} && pct status {ctid}").stdout == "status: stopped\n"
    r = lab.run("pve2", f"pct exec {ctid} -- true")
    assert (r.rc, r.stderr) == (255, f"CT {ctid} not running\n")


def test_filesystem_persists_across_container_restart(lab: LabHandle) -> None:
    ctid = _new_ct(lab)
    lab.run("pve2", f"pct start {ctid} >/dev/null && pct exec {ctid} -- sh -c 'echo kept > /root/kept'")
    r = lab.run("pve2", f"pct reboot {ctid} >/dev/null && pct exec {ctid} -- cat /root/kept")
    assert r.stdout == "kept\n", r.stderr
    lab.run("pve2", f"pct stop {ctid}")


def test_missing_device_refuses_set_and_start(lab: LabHandle) -> None:
    ctid = _new_ct(lab)
    r = lab.run("pve2", f"pct set {ctid} --dev0 /dev/nvidia-uvm,gid=44")
    assert (r.rc, r.stderr) == (255, "Device /dev/nvidia-uvm does not exist\n")
    lab.run("pve2", f"echo 'dev0: /dev/nvidia-uvm,gid=44' >> /etc/pve/lxc/{ctid}.conf")
    r = lab.run("pve2", f"pct start {ctid}")
    assert (r.rc, r.stderr) == (255, "Device /dev/nvidia-uvm does not exist\n")
    assert lab.run("pve2", f"pct status {ctid}").stdout == "status: stopped\n"


def test_dev_entries_appear_as_device_nodes_inside(lab: LabHandle) -> None:
    ctid = _new_ct(lab)
    assert lab.run("pve2", "test -e /dev/nvidia7 || mknod -m 666 /dev/nvidia7 c 195 7").rc == 0
    assert lab.run("pve2", f"pct set {ctid} --dev0 /dev/nvidia7,gid=44").rc == 0
    r = lab.run("pve2", f"pct start {ctid} >/dev/null && pct exec {ctid} -- stat -c '%F %t:%T %a %g' /dev/nvidia7")
    assert r.stdout == "character special file c3:7 660 44\n", r.stderr
    lab.run("pve2", f"pct stop {ctid}")


def test_raw_lxc_keys_are_kept_as_written_and_applied(lab: LabHandle) -> None:
    ctid = _new_ct(lab)
    lines = (
        "lxc.cgroup2.devices.allow: c 195:* rwm\n"
        "lxc.mount.entry: /dev/null dev/nvidiactl none bind,optional,create=file\n"
        "lxc.mount.entry: /dev/nvidia-absent dev/nvidia-absent none bind,optional,create=file\n"
    )
    lab.run("pve2", f"printf '{lines}' >> /etc/pve/lxc/{ctid}.conf")
    assert lab.run("pve2", f"pct set {ctid} --cores 4").rc == 0
    conf = lab.run("pve2", f"cat /etc/pve/lxc/{ctid}.conf").stdout
    assert conf.endswith("unprivileged: 1\n" + lines)
    assert "cores: 4\n" in conf
    r = lab.run(
        "pve2",
        f"pct start {ctid} >/dev/null && pct exec {ctid} -- sh -c 'test -c /dev/nvidiactl && echo bound; "
        "test -e /dev/nvidia-absent || echo skipped'",
    )
    assert r.stdout == "bound\nskipped\n", r.stderr
    lab.run("pve2", f"pct stop {ctid}")


def test_lxc_keys_cannot_be_set_through_pct_set(lab: LabHandle) -> None:
    ctid = _new_ct(lab)
    r = lab.run("pve2", f"pct set {ctid} --lxc.prlimit.memlock unlimited")
    assert r.rc == 255 and r.stderr.startswith("Unknown option: lxc.prlimit.memlock\n400 unable to parse option")


def test_a_new_dev_is_hot_plugged_a_changed_one_stays_pending_until_reboot(lab: LabHandle) -> None:
    # pve-container Config.pm:1729-1735 vmconfig_hotplug_pending: a devN not set yet is hot-plugged into the
    # running CT (device_passthrough_hotplug); an existing one is skipped and stays pending
    ctid = _new_ct(lab)
    lab.run("pve2", "test -e /dev/nvidia6 || mknod -m 666 /dev/nvidia6 c 195 6")
    lab.run("pve2", "test -e /dev/nvidia5 || mknod -m 666 /dev/nvidia5 c 195 5")
    lab.run("pve2", f"pct start {ctid}")
    assert lab.run("pve2", f"pct set {ctid} --dev0 /dev/nvidia6 --memory 4096").rc == 0
    conf = lab.run("pve2", f"cat /etc/pve/lxc/{ctid}.conf").stdout
    assert "[pve:pending]" not in conf and "memory: 4096" in conf and "dev0: /dev/nvidia6" in conf
    assert lab.run("pve2", f"pct exec {ctid} -- test -c /dev/nvidia6").rc == 0
    assert lab.run("pve2", f"pct set {ctid} --dev0 /dev/nvidia5").rc == 0
    main, _, pending = lab.run("pve2", f"cat /etc/pve/lxc/{ctid}.conf").stdout.partition("\n[pve:pending]\n")
    assert "dev0: /dev/nvidia6" in main and "dev0: /dev/nvidia5" in pending
    assert lab.run("pve2", f"pct exec {ctid} -- test -e /dev/nvidia5").rc == 1
    lab.run("pve2", f"pct reboot {ctid}")
    assert lab.run("pve2", f"pct exec {ctid} -- test -c /dev/nvidia5").rc == 0
    assert "[pve:pending]" not in lab.run("pve2", f"cat /etc/pve/lxc/{ctid}.conf").stdout
    lab.run("pve2", f"pct stop {ctid}")


def test_destroy_removes_config_and_refuses_running(lab: LabHandle) -> None:
    ctid = _new_ct(lab)
    lab.run("pve2", f"pct start {ctid}")
    r = lab.run("pve2", f"pct destroy {ctid}")
    assert (r.rc, r.stderr) == (255, f"CT {ctid} is running - destroy failed\n")
    assert lab.run("pve2", f"pct stop {ctid} && pct destroy {ctid}").rc == 0
    r = lab.run("pve2", f"pct config {ctid}")
    assert (r.rc, r.stderr) == (2, f"Configuration file 'nodes/pve2/lxc/{ctid}.conf' does not exist\n")


def test_container_does_not_see_host_secrets(lab: LabHandle) -> None:
    ctid = _new_ct(lab)
    r = lab.run(
        "pve2",
        f"pct start {ctid} >/dev/null && pct exec {ctid} -- sh -c 'ls /etc/ssh/ssh_host_* 2>/dev/null | wc -l; "
        'ls -A /root | grep -vc "^\\.\\(bashrc\\|profile\\)$"\'; pct stop {ctid}',
    )
    assert r.stdout.split() == ["0", "0"], r.stdout + r.stderr


def test_list_prints_what_pct_list_prints(lab: LabHandle) -> None:
    """The header and the padding of a real ``pct list`` (tests/fixtures/cluster/pct-list/), a lock in its column."""
    ctid = _new_ct(lab)
    other = _new_ct(lab)
    assert lab.run("pve2", f"pct start {ctid}").rc == 0
    assert lab.run("pve2", f"pct set {other} --lock backup").rc == 0
    out = lab.run("pve2", "pct list").stdout.splitlines()
    real = (CAPTURES / "pct-list" / "pmx5-14-containers.txt").read_text().splitlines()
    assert out[0] == real[0]  # trailing spaces and all
    rows = {r.vmid: r for r in pct_rows("\n".join(out))}
    assert rows[ctid] == PctRow(ctid, "running", "", f"ct{ctid}")
    assert rows[other] == PctRow(other, "stopped", "backup", f"ct{other}")
    assert out[1 + sorted(rows).index(ctid)] == f"{ctid:<10} {'running':<10} {'':<12} {'ct' + str(ctid):<20}"
    assert len(rows) == len(out) - 1
    assert lab.run("pve2", f"pct stop {ctid}").rc == 0
