"""Guest-config edits on a lab node, with PVE's semantics: another writer's change between gpuhost's read and
its write is kept (digest on the API route, PVE's per-guest flock and a re-read on the raw-edit route), a
pending delete is repaired, a staged value is ok-waiting, and foreign devices and bind mounts stay.

The concurrent write is injected deterministically *on the node*: a ``cat`` placed ahead in root's PATH
serves every read as the real one, and after serving the container's config (gpuhost's fact read) runs the
next queued ``pct set`` from a queue file, before gpuhost's read returns. So the other writer's change lands
exactly between gpuhost's read and its write; gpuhost itself is not told anything.
"""

from __future__ import annotations

import itertools

import pytest

from tests.integration.provision.conftest import run_json, task

pytestmark = pytest.mark.integration

TEMPLATE = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"
QUEUE = "/root/concurrent-writes"
_CTIDS = itertools.count(300)

# serves reads as /bin/cat; after serving a CT config (gpuhost reads files with `cat -- PATH...`, the config
# alone or with the batch's other files) it runs the first queued command of QUEUE (one per read) with the real cat
CAT_WRAPPER = f"""#!/bin/sh
/bin/cat "$@"; rc=$?
case "$*" in
  "-- "*" /etc/pve/lxc/"*.conf*|"-- /etc/pve/lxc/"*.conf*)
    if [ -s {QUEUE} ]; then
      next=$(head -n 1 {QUEUE}); sed -i 1d {QUEUE}
      PATH=/usr/sbin:/usr/bin:/sbin:/bin sh -c "$next" >/dev/null 2>&1
    fi ;;
esac
exit $rc
"""


@pytest.fixture(scope="module")
def lab(make_lab):
    lab = make_lab([("systemd-boot", "amd")])
    nodes = "; ".join(f"mknod -m 666 /dev/nvidia{i} c 195 {i}" for i in range(2))
    setup = (
        f"{nodes}; mknod -m 666 /dev/nvidiactl c 195 255; mknod -m 666 /dev/nvidia-uvm c 511 0; "
        "mkdir -p /dev/dri && mknod -m 666 /dev/dri/card0 c 226 0; mkdir -p /usr/local/bin; "
        f"cat > /usr/local/bin/cat <<'EOF'\n{CAT_WRAPPER}EOF\nchmod 755 /usr/local/bin/cat; : > {QUEUE}"
    )
    r = lab.run("pve1", setup)
    assert r.rc == 0, r.stderr
    return lab


def new_ct(lab, *settings: str, start: bool = True) -> int:
    ctid = next(_CTIDS)
    r = lab.run(
        "pve1", f"pct create {ctid} {TEMPLATE} --hostname ct{ctid} --memory 2048 --rootfs local-lvm:8 --cores 2"
    )
    assert r.rc == 0, r.stderr
    for line in settings:
        assert lab.run("pve1", f"echo '{line}' >> /etc/pve/lxc/{ctid}.conf").rc == 0
    if start:
        r = lab.run("pve1", f"pct start {ctid}")
        assert r.rc == 0, r.stderr
    return ctid


def playbook(tmp_path, ctid: int, devices: list[str]) -> str:
    path = tmp_path / f"devices-{ctid}.yml"
    path.write_text(
        "- hosts: all\n"
        "  tasks:\n"
        f"    - name: CT {ctid} devices\n"
        f"      lxc_devices: {{ctid: {ctid}, devices: [{', '.join(devices)}]}}\n"
        f"      notify: restart CT {ctid}\n"
        "  handlers:\n"
        f"    - name: restart CT {ctid}\n"
        f"      lxc_restart: {{ctid: {ctid}}}\n"
    )
    return str(path)


def config(lab, ctid: int) -> str:
    return lab.run("pve1", f"/bin/cat /etc/pve/lxc/{ctid}.conf").stdout


def queue(lab, *commands: str) -> None:
    assert lab.run("pve1", f"printf '%s\\n' {' '.join(repr(c) for c in commands)} > {QUEUE}").rc == 0


def run(lab, book: str, *extra: str) -> tuple[int, dict]:
    return run_json("run", book, "-i", str(lab.inventory), *extra)


GPUS = ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm"]


def test_concurrent_pct_set_is_kept_on_the_api_route(lab, tmp_path):
    # the other writer puts an iGPU at dev1, the index gpuhost planned for /dev/nvidia1: without the
    # digest gpuhost's PUT would overwrite it; with it PVE refuses, gpuhost re-plans and takes free indices
    ctid = new_ct(lab, "dev0: /dev/nvidia0,gid=44", "lxc.prlimit.memlock: unlimited", start=False)
    queue(lab, f"pct set {ctid} --dev1 /dev/dri/card0,gid=44 --cores 4")
    code, report = run(lab, playbook(tmp_path, ctid, GPUS))
    assert code == 0, report["tasks"]
    assert task(report, "pve1", "devices")["status"] == "changed"
    conf = config(lab, ctid)
    assert "cores: 4\n" in conf and "dev1: /dev/dri/card0,gid=44\n" in conf, conf
    assert all(f"/dev/{d},gid=44" in conf for d in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"))
    assert lab.run("pve1", f"/bin/cat {QUEUE}").stdout == ""  # the injected write did run


def test_raw_edit_waits_for_pves_config_lock(lab, tmp_path):
    # a writer that holds PVE's per-guest lock while it reads, then rewrites the whole file (as PVE's tools
    # do): gpuhost's raw edit must wait for the lock, see the new digest and re-plan on top of that change
    devs = [f"dev{i}: {d},gid=44" for i, d in enumerate(GPUS)]
    ctid = new_ct(lab, *devs, start=False)
    conf_path, lock = f"/etc/pve/lxc/{ctid}.conf", f"/run/lock/lxc/pve-config-{ctid}.lock"
    holder = (
        f"/bin/cat {conf_path} > /root/stale; touch /root/held; sleep 2; "
        f"sed s/^cores:.*/cores:\\ 4/ /root/stale > {conf_path}.new; mv {conf_path}.new {conf_path}"
    )
    line = f"rm -f /root/held; flock {lock} sh -c '{holder}' & while [ ! -e /root/held ]; do sleep 0.05; done"
    assert lab.run("pve1", f"cat > {QUEUE} <<'EOF'\n{line}\nEOF").rc == 0
    code, report = run(lab, playbook(tmp_path, ctid, GPUS))
    assert code == 0, report["tasks"]
    conf = config(lab, ctid)
    assert "cores: 4\n" in conf and "lxc.prlimit.memlock: unlimited\n" in conf, conf


def test_concurrent_pct_set_is_kept_on_the_locked_raw_edit_route(lab, tmp_path):
    devs = [f"dev{i}: {d},gid=44" for i, d in enumerate(GPUS)]
    ctid = new_ct(lab, *devs, start=False)
    queue(lab, f"pct set {ctid} --cores 4")
    code, report = run(lab, playbook(tmp_path, ctid, GPUS))
    assert code == 0, report["tasks"]
    conf = config(lab, ctid)
    assert "cores: 4\n" in conf and "lxc.prlimit.memlock: unlimited\n" in conf, conf


def test_a_writer_that_keeps_changing_the_config_fails_naming_its_change(lab, tmp_path):
    ctid = new_ct(lab, "lxc.prlimit.memlock: unlimited", start=False)
    # one change after each of gpuhost's reads (its first read, the re-read under the run lock, the re-plan)
    queue(lab, f"pct set {ctid} --cores 4", f"pct set {ctid} --cores 6", f"pct set {ctid} --cores 8")
    code, report = run(lab, playbook(tmp_path, ctid, GPUS))
    assert code == 1
    error = task(report, "pve1", "devices")["error"]
    assert f"/etc/pve/lxc/{ctid}.conf changed again" in error and "→ 8" in error, error
    assert "cores: 8\n" in config(lab, ctid)  # nothing of the other writer's was reverted


def test_pending_delete_of_a_gpu_is_repaired(lab, tmp_path):
    devs = [f"dev{i}: {d},gid=44" for i, d in enumerate(GPUS)]
    ctid = new_ct(lab, *devs, "lxc.prlimit.memlock: unlimited")
    assert lab.run("pve1", f"pct set {ctid} --delete dev3").rc == 0
    assert "delete: dev3" in config(lab, ctid)
    code, report = run(lab, playbook(tmp_path, ctid, GPUS))
    assert code == 0, report["tasks"]
    assert task(report, "pve1", "devices")["status"] == "changed"
    conf = config(lab, ctid)
    assert "[pve:pending]" not in conf and "dev3: /dev/nvidia-uvm,gid=44" in conf, conf
    code, report = run(lab, playbook(tmp_path, ctid, GPUS))
    assert task(report, "pve1", "devices")["status"] == "ok"
    # the restart the first run was not allowed to do is still owed (the handler is kept on the node) ...
    assert report["hosts"]["pve1"]["restart_required"] == [ctid]
    # ... until the operator allows it; then nothing is left
    code, report = run(lab, playbook(tmp_path, ctid, GPUS), "--allow-restart")
    assert code == 0 and report["hosts"]["pve1"]["restart_required"] == [], report["tasks"]
    code, report = run(lab, playbook(tmp_path, ctid, GPUS))
    assert report["hosts"]["pve1"]["restart_required"] == [] and report["hosts"]["pve1"]["changed"] == 0


def test_staged_value_is_ok_waiting_for_restart_and_the_recap_says_so(lab, tmp_path):
    devs = [f"dev{i}: {d},gid=0" if i == 0 else f"dev{i}: {d},gid=44" for i, d in enumerate(GPUS)]
    ctid = new_ct(lab, *devs, "lxc.prlimit.memlock: unlimited")
    book = playbook(tmp_path, ctid, GPUS)
    code, report = run(lab, book)  # no --allow-restart: dev0 is staged as pending
    assert code == 0, report["tasks"]
    assert task(report, "pve1", "devices")["status"] == "changed"
    assert "dev0: /dev/nvidia0,gid=44" in config(lab, ctid).split("[pve:pending]")[1]
    code, report = run(lab, book)
    devices = task(report, "pve1", "devices")
    assert devices["status"] == "ok" and "waiting for restart" in devices["reason"], devices
    assert report["hosts"]["pve1"]["restart_required"] == [ctid]
    code, report = run(lab, book, "--allow-restart")
    assert task(report, "pve1", f"restart CT {ctid}")["status"] == "changed"
    conf = config(lab, ctid)
    assert "[pve:pending]" not in conf and "dev0: /dev/nvidia0,gid=44" in conf
    code, report = run(lab, book)
    assert task(report, "pve1", "devices")["status"] == "ok"
    assert report["hosts"]["pve1"]["restart_required"] == []


def test_igpu_device_and_user_bind_mount_are_kept(lab, tmp_path):
    mount = "lxc.mount.entry: /srv/models srv/models none bind,create=dir 0 0"
    ctid = new_ct(lab, "dev0: /dev/dri/card0,gid=44", "lxc.prlimit.memlock: unlimited", mount, start=False)
    code, report = run(lab, playbook(tmp_path, ctid, GPUS), "--diff")
    assert code == 0, report["tasks"]
    devices = task(report, "pve1", "devices")
    assert "+dev1: /dev/nvidia0,gid=44" in devices["diff"], devices["diff"]  # the API change, as a diff
    conf = config(lab, ctid)
    assert "dev0: /dev/dri/card0,gid=44\n" in conf and mount + "\n" in conf, conf
    assert "dev1: /dev/nvidia0,gid=44" in conf and "dev4: /dev/nvidia-uvm,gid=44" in conf
    code, report = run(lab, playbook(tmp_path, ctid, GPUS))
    assert task(report, "pve1", "devices")["status"] == "ok"


def test_user_bind_mount_from_another_source_on_a_gpu_node_fails_with_the_fix(lab, tmp_path):
    mount = "lxc.mount.entry: /opt/other dev/nvidia0 none bind,create=file"
    ctid = new_ct(lab, mount, start=False)
    code, report = run(lab, playbook(tmp_path, ctid, GPUS))
    assert code == 1
    error = task(report, "pve1", "devices")["error"]
    assert f"/etc/pve/lxc/{ctid}.conf:" in error and "mounts /opt/other on dev/nvidia0" in error, error
    assert "remove that line" in error
