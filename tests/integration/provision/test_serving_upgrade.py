"""docs/operate.md's runbook "Upgrade the driver of a node that serves", step by step on a lab node whose container
serves (an SGLang server process in CT 200): ``--check`` plans the install and the reboot and says the node serves
before anything is installed; a run without ``--reboot-serving`` is refused and leaves nothing that blocks the
next; the run that names the node installs, reboots and proves the new driver on the host and in the container."""

from __future__ import annotations

import shlex

import pytest

from tests.integration.provision.conftest import gpuhost, run_json, task
from tests.integration.provision.test_provision_lxc import with_pin

pytestmark = pytest.mark.integration

OLD, NEW = "580.95.05", "580.105.08"
SERVER = "python3 -m sglang.launch_server --model-path /models/GLM-5-NVFP4 --port 30000"


@pytest.fixture(scope="module")
def lab(make_lab):
    return make_lab([("systemd-boot", "amd")], gpus=8)


def module_on_disk(lab) -> str:
    return lab.run("pve1", "modinfo -F version nvidia").stdout.strip()


def test_the_serving_node_driver_upgrade_runbook(lab, tmp_path):
    code, report = run_json("provision", "lxc", "-i", str(lab.inventory), "--allow-reboot", "--allow-restart")
    assert code == 0, [t for t in report["tasks"] if t["status"] == "failed"]
    serve = f"nohup bash -c 'exec -a \"{SERVER}\" sleep 900' >/dev/null 2>&1 &"
    assert lab.run("pve1", f"pct exec 200 -- bash -c {shlex.quote(serve)}").rc == 0
    inventory = str(with_pin(lab, tmp_path, NEW))
    boots = lab.boots("pve1")
    record = lab.run("pve1", "cat /var/lib/gpuhost/last-reboot.json").stdout  # the first provisioning's reboot

    # 1. --check: the install and the reboot are planned, and the reboot says the node serves
    r = gpuhost("provision", "lxc", "-i", inventory, "--check", "--diff")
    assert r.returncode == 0, r.stdout + r.stderr
    reboot_line = next(line for line in r.stdout.splitlines() if "reboot if the running kernel" in line)
    assert f"NVIDIA module {OLD} loaded, {NEW} to be installed by this run" in reboot_line, r.stdout
    assert f"pve1 serves a model ({SERVER[:40]}" in r.stdout, r.stdout
    assert "it is not rebooted unless you name it: --reboot-serving pve1" in r.stdout
    assert module_on_disk(lab) == OLD and lab.boots("pve1") == boots

    # 2. without --reboot-serving the reboot is refused; nothing is recorded that would refuse the next one
    code, report = run_json("provision", "lxc", "-i", inventory, "--allow-reboot", "--allow-restart")
    assert code == 1
    refused = task(report, "pve1", "reboot if the running kernel")
    assert refused["status"] == "failed" and "--reboot-serving pve1" in refused["error"]
    assert lab.boots("pve1") == boots
    assert lab.run("pve1", "cat /var/lib/gpuhost/last-reboot.json").stdout == record

    # 3. naming the node: installed, rebooted into the new module, the container realigned and proven
    code, report = run_json(
        "provision", "lxc", "-i", inventory, "--allow-reboot", "--allow-restart", "--reboot-serving", "pve1"
    )
    assert code == 0, [t for t in report["tasks"] if t["status"] == "failed"]
    assert report["hosts"]["pve1"]["rebooted"] is True and lab.boots("pve1") == boots + 1
    loaded = lab.run("pve1", "cat /proc/driver/nvidia/version").stdout.splitlines()[0]
    assert f" {NEW} " in loaded and OLD not in loaded, loaded  # NVRM version: … Kernel Module for x86_64  VERSION  …
    verified = task(report, "pve1", "CT 200: verified")
    assert verified["status"] == "ok" and f"= host module {NEW}" in verified["reason"]

    # 4. the proofs again, as a separate command
    r = gpuhost("verify", "lxc", "-i", inventory)
    assert r.returncode == 0, r.stdout + r.stderr
