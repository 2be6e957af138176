"""`gpuhost provision lxc` end to end on a GPU lab node: 8 GPUs in a container, verified; converges;
re-aligns after a driver pin upgrade; clear causes and fixes for the classic failures."""

import re

import pytest
from ruamel.yaml import YAML

from tests.integration.provision.conftest import gpuhost, run_json, task

pytestmark = pytest.mark.integration

# the container proofs (gpuhost.checks.container), reported by the role's one verify task
CHECKS = [
    "nvidia-smi -L lists 8 GPUs",
    "= host module 580.95.05",
    "/dev/nvidia-uvm present",
    "ulimit -l unlimited",
    "cuInit ok, 8 CUDA devices",
]


@pytest.fixture(scope="module")
def lab(make_lab):
    return make_lab([("systemd-boot", "amd")], gpus=8)


def with_pin(lab, tmp_path, version: str):
    """A copy of the lab inventory whose driver pin is ``version`` (one the lab serves)."""
    yaml = YAML()
    doc = yaml.load(lab.inventory.read_text())
    doc["vars"]["nvidia_driver"] = dict(doc["vars"]["lab_nvidia_drivers"][version], version=version)
    for node in doc["nodes"].values():
        for section, key in (
            ("ssh", "key_file"),
            ("ssh", "known_hosts_file"),
            ("api", "token_secret_file"),
            ("api", "ca_file"),
        ):
            node[section][key] = str(lab.inventory.parent / node[section][key])
    path = tmp_path / f"inventory-{version}.yml"
    with path.open("w") as fh:
        yaml.dump(doc, fh)
    return path


def test_check_diff_shows_the_whole_plan_and_changes_nothing(lab):
    watched = (
        "cat /etc/kernel/cmdline /proc/cmdline; ls /etc/pve/lxc; ls /etc/modules-load.d; "
        "ls /etc/systemd/system; dpkg -l | grep -c ^ii; cat /proc/driver/nvidia/version 2>&1"
    )
    before = lab.run("pve1", watched).stdout
    boots = lab.boots("pve1")
    r = gpuhost("provision", "lxc", "-i", str(lab.inventory), "--check", "--diff", "--allow-reboot", "--allow-restart")
    assert r.returncode == 0, r.stdout + r.stderr
    for planned in (
        "+root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt amd_iommu=on",
        "install NVIDIA 580.95.05",
        "+nvidia_uvm",
        "+ExecStart=/usr/bin/nvidia-modprobe -c0 -u",
        "would change",
        "create CT 200",
    ):
        assert planned in r.stdout, planned
    assert lab.run("pve1", watched).stdout == before
    assert lab.boots("pve1") == boots


def test_first_run_builds_a_verified_8_gpu_container_second_run_changes_nothing(lab, tmp_path):
    log = tmp_path / "run.log"
    code, report = run_json(
        "provision", "lxc", "-i", str(lab.inventory), "--allow-reboot", "--allow-restart", "--log", str(log)
    )
    assert code == 0, [t for t in report["tasks"] if t["status"] == "failed"]
    # progress while waiting, in the plain log: the driver download's bytes and rate, the DKMS build's phases
    text = log.read_text()
    assert re.search(
        r"\[pve1\] driver download: \d+\.\d (KiB|MiB) downloaded, [\d.]+ (B|KiB|MiB|GiB)/s average \(\d+ s\)", text
    ), text
    assert re.search(r"\[pve1\] driver install \(DKMS build\): building the kernel module \(\d+ s\)", text), text
    assert re.search(r"\[pve1\] driver install \(DKMS build\): done \([1-9]\d* s\)", text), text
    assert "\x1b" not in text and "% Total" not in text
    # gpuhost's default CT (privileged, no nesting, Debian 12 = systemd 252) ends its create task
    # "WARNINGS: 1" on PVE (pve-container Setup/Base.pm check_systemd_nesting): a success, warning shown
    created = task(report, "pve1", "CT 200 exists")
    assert created["status"] == "changed"
    nesting = "PVE task WARNINGS: 1: Systemd 252 detected. You may need to enable nesting."
    assert created["warnings"] == [nesting]
    assert f"[WARNING]: {nesting}" in text
    verified = task(report, "pve1", "CT 200: verified")
    assert verified["status"] == "ok"
    for check in CHECKS:
        assert check in verified["reason"], verified["reason"]
    conf = lab.run("pve1", "cat /etc/pve/lxc/200.conf").stdout
    assert all(f"dev{i}: /dev/nvidia{i},gid=44" in conf for i in range(8))
    assert "/dev/nvidia-uvm,gid=44" in conf and "lxc.prlimit.memlock: unlimited" in conf
    listed = lab.run("pve1", "pct exec 200 -- nvidia-smi -L").stdout.splitlines()
    assert len([ln for ln in listed if ln.startswith("GPU ")]) == 8

    code, again = run_json("provision", "lxc", "-i", str(lab.inventory), "--allow-reboot", "--allow-restart")
    assert code == 0
    assert again["hosts"]["pve1"]["changed"] == 0 and again["hosts"]["pve1"]["rebooted"] is False
    # converged: the batched reads of the node and the container (pct exec inside the node's batch), no more
    assert again["hosts"]["pve1"]["round_trips"] <= 3, again["hosts"]["pve1"]
    # and once a converged run recorded what it read, the next reads it all in one command when it connects
    code, third = run_json("provision", "lxc", "-i", str(lab.inventory), "--allow-reboot", "--allow-restart")
    assert code == 0 and third["hosts"]["pve1"]["changed"] == 0
    assert third["hosts"]["pve1"]["round_trips"] == 1, third["hosts"]["pve1"]


def test_rerun_starts_a_persistenced_stopped_by_hand(lab):
    # the trap: the unit stayed enabled, so a role that only asks "enabled" left it stopped
    lab.run("pve1", "systemctl stop nvidia-persistenced")
    assert lab.run("pve1", "systemctl is-active nvidia-persistenced").stdout.strip() != "active"
    code, report = run_json("provision", "lxc", "-i", str(lab.inventory), "--allow-reboot", "--allow-restart")
    assert code == 0, [t for t in report["tasks"] if t["status"] == "failed"]
    # read with the last run's remembered reads: the stopped unit is this run's reading, and is put right
    assert task(report, "pve1", "nvidia-persistenced.service running")["status"] == "changed"
    assert report["hosts"]["pve1"]["rebooted"] is False
    assert lab.run("pve1", "systemctl is-active nvidia-persistenced").stdout.strip() == "active"


def test_version_mismatch_without_reboot_names_cause_and_fix(lab, tmp_path):
    inventory = with_pin(lab, tmp_path, "580.105.08")
    r = gpuhost("provision", "lxc", "-i", str(inventory))  # new pin, but no --allow-reboot
    assert r.returncode == 1
    assert "reboot required" in r.stdout
    assert "the host runs NVIDIA module 580.95.05 but the pin is 580.105.08" in r.stdout
    assert "--allow-reboot" in r.stdout
    # what a user sees in the container meanwhile is the real mismatch, and it is unchanged by gpuhost
    assert (
        "580.95.05"
        in lab.run("pve1", "pct exec 200 -- nvidia-smi --query-gpu=driver_version --format=csv,noheader -i 0").stdout
    )


def test_pin_upgrade_then_rerun_realigns_the_container(lab, tmp_path):
    inventory = with_pin(lab, tmp_path, "580.105.08")
    code, report = run_json("provision", "lxc", "-i", str(inventory), "--allow-reboot", "--allow-restart")
    assert code == 0, [t for t in report["tasks"] if t["status"] == "failed"]
    assert report["hosts"]["pve1"]["rebooted"] is True
    driver = task(report, "pve1", "userspace (no kernel modules)")
    assert driver["status"] == "changed" and "now: 580.95.05" in driver["reason"]
    verified = task(report, "pve1", "CT 200: verified")
    assert verified["status"] == "ok" and "= host module 580.105.08" in verified["reason"]
    out = lab.run("pve1", "pct exec 200 -- nvidia-smi --query-gpu=driver_version --format=csv,noheader -i 0")
    assert out.stdout.strip() == "580.105.08"


def test_missing_uvm_device_is_refused_with_the_fix(lab, tmp_path):
    lab.run("pve1", "pct stop 200; rm -f /dev/nvidia-uvm /dev/nvidia-uvm-tools")
    book = tmp_path / "devices.yml"
    book.write_text(
        "- hosts: all\n  tasks:\n    - lxc_devices:\n        ctid: 200\n"
        "        devices: [/dev/nvidia0, /dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools]\n"
    )
    r = gpuhost("run", str(book), "-i", str(lab.inventory))
    assert r.returncode == 1
    assert "/dev/nvidia-uvm, /dev/nvidia-uvm-tools missing" in r.stdout
    assert "nvidia-modprobe -c0 -u" in r.stdout
    start = lab.run("pve1", "pct start 200")
    assert start.rc != 0 and "Device /dev/nvidia-uvm does not exist" in start.stderr
    # provisioning recreates the nodes at once (the boot unit covers later reboots) and starts the CT
    code, report = run_json("provision", "lxc", "-i", str(with_pin(lab, tmp_path, "580.105.08")), "--allow-restart")
    assert code == 0, [t for t in report["tasks"] if t["status"] == "failed"]
    assert task(report, "pve1", "/dev/nvidia-uvm now")["status"] == "changed"
    verified = task(report, "pve1", "CT 200: verified")
    assert verified["status"] == "ok" and "cuInit ok" in verified["reason"]


def test_token_only_credential_fails_early_naming_pves_rule(lab, tmp_path):
    inv = tmp_path / "token-only.yml"
    token_file = lab.inventory.parent / "pve1.token"
    inv.write_text(f"""nodes:
  pve1:
    address: 127.0.0.1
    connection: api
    api:
      url: https://127.0.0.1:8006
      token_id: root@pam!gpuhost
      token_secret_file: {token_file}
    containers:
      200: {{hostname: llm}}
""")
    r = gpuhost("provision", "lxc", "-i", str(inv))
    assert r.returncode == 2  # refused at load, before the node is contacted
    assert "token-only.yml:4: field 'nodes.pve1.connection'" in r.stderr
    assert "configuring device passthrough is only allowed for root@pam" in r.stderr
    assert "give gpuhost SSH as root" in r.stderr
    assert lab.run("pve1", "cat /etc/pve/lxc/200.conf").rc == 0  # untouched, still there


def test_verify_host_and_lxc_share_the_roles_checks_and_name_what_broke(lab):
    code, report = run_json("provision", "lxc", "-i", str(lab.inventory), "--allow-reboot", "--allow-restart")
    assert code == 0, [t for t in report["tasks"] if t["status"] == "failed"]
    host = gpuhost("verify", "host", "-i", str(lab.inventory))
    assert host.returncode == 0, host.stdout + host.stderr
    for name in ("host.cmdline_booted", "host.nvidia_module", "host.nvidia_uvm", "host.iommu_groups"):
        assert name in host.stdout
    lxc = gpuhost("verify", "lxc", "-i", str(lab.inventory), "--json")
    assert lxc.returncode == 0, lxc.stdout + lxc.stderr
    import json

    doc = json.loads(lxc.stdout)
    assert doc["round_trips"] <= 2, doc["round_trips"]  # the node's facts in one batch, the container's in one
    checks = {f["check"]: f["level"] for f in doc["findings"]}
    assert checks == {
        "ct.running": "PASS",
        "ct.devices_configured": "PASS",
        "ct.device_nodes": "PASS",
        "ct.driver_held": "PASS",
        "ct.gpus_listed": "PASS",
        "ct.driver_match": "PASS",
        "ct.uvm": "PASS",
        "ct.memlock": "PASS",
        "ct.cuda_init": "PASS",
    }
    lab.run("pve1", "pct stop 200")
    try:
        broken = gpuhost("verify", "lxc", "-i", str(lab.inventory))
        assert broken.returncode == 1
        assert "ct.running" in broken.stdout and "CT 200 is stopped" in broken.stdout
    finally:
        lab.run("pve1", "pct start 200")
