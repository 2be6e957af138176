"""`gpuhost doctor` on a provisioned LXC node (two GPUs, CT 200): /dev/nvidia-uvm missing after the boot, and a
container userspace that no longer matches the host module. Each is the top finding, and the command doctor
prints for it, run, makes it go away."""

import shlex

import pytest

from tests.integration.provision.conftest import gpuhost, run_json
from tests.integration.provision.test_provision_lxc import with_pin

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def lab(make_lab):
    handle = make_lab([("systemd-boot", "amd")], gpus=2)
    code, report = run_json("provision", "lxc", "-i", str(handle.inventory), "--allow-reboot", "--allow-restart")
    assert code == 0, [t for t in report["tasks"] if t["status"] == "failed"]
    return handle


def doctor(inventory):
    code, doc = run_json("doctor", "-i", str(inventory))
    assert doc["schema"] == "gpuhost.doctor/1"
    return code, doc


def run_fix(command):
    words = shlex.split(command)
    assert words[0] == "gpuhost"
    r = gpuhost(*words[1:], timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_provisioned_node_has_no_fail(lab):
    code, doc = doctor(lab.inventory)
    assert code == 0, doc["findings"]
    assert doc["passed"] > 10 and doc["round_trips"] == 2  # the host's batched read, then CT 200's


def test_nvidia_uvm_missing_after_boot_is_the_top_finding_and_provision_host_brings_it_back(lab):
    lab.run("pve1", "rm -f /dev/nvidia-uvm")  # what a boot without nvidia-modprobe -u leaves
    code, doc = doctor(lab.inventory)
    assert code == 1
    top = doc["findings"][0]
    assert (top["check"], top["subject"], top["level"]) == ("host.nvidia_uvm", "pve1", "FAIL")
    assert "/dev/nvidia-uvm is missing" in top["message"]
    assert top["command"] == f"gpuhost provision host -i {lab.inventory} --limit pve1 --allow-reboot"
    run_fix(top["command"])
    _code, after = doctor(lab.inventory)
    assert "host.nvidia_uvm" not in [f["check"] for f in after["findings"]], after["findings"]


def test_a_container_userspace_not_matching_the_host_module_is_the_top_finding(lab, tmp_path):
    # staged by moving the host module alone to the lab's other driver: CT 200 keeps its userspace 580.95.05
    newer = with_pin(lab, tmp_path, "580.105.08")
    code, report = run_json("provision", "host", "-i", str(newer), "--allow-reboot")
    assert code == 0, [t for t in report["tasks"] if t["status"] == "failed"]
    code, doc = doctor(newer)
    assert code == 1
    top = doc["findings"][0]
    assert (top["check"], top["subject"]) == ("ct.driver_match", "pve1/CT 200")
    assert top["message"] == "container userspace 580.95.05, host module 580.105.08"
    assert top["command"] == (
        f"gpuhost provision lxc -i {newer} --limit pve1 --ctid 200 --allow-reboot --allow-restart"
    )
    run_fix(top["command"])
    _code, after = doctor(newer)
    assert "ct.driver_match" not in [f["check"] for f in after["findings"]], after["findings"]
