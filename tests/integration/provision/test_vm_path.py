"""`provision host` with gpu_path: vm — vfio-pci owns the GPUs after the reboot, and that is verified."""

import json

import pytest

from tests.integration.provision.conftest import gpuhost, run_json, task

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def lab(make_lab):
    return make_lab([("grub", "intel")], gpus=2)


def test_vfio_binds_the_gpus_after_reboot(lab):
    code, report = run_json("provision", "host", "-i", str(lab.inventory), "-e", "gpu_path=vm", "--allow-reboot")
    assert code == 0, [(t["task"], t["error"]) for t in report["tasks"] if t["status"] == "failed"]
    assert task(report, "pve1", "update initramfs")["status"] == "changed"
    assert "2 GPUs bound to vfio-pci" in task(report, "pve1", "verify the booted host")["reason"]
    modules = lab.run("pve1", "cat /etc/modules").stdout.split()
    assert modules[-3:] == ["vfio", "vfio_iommu_type1", "vfio_pci"]
    assert "options vfio-pci ids=10de:2bb5" in lab.run("pve1", "cat /etc/modprobe.d/gpuhost-vfio.conf").stdout
    code, again = run_json("provision", "host", "-i", str(lab.inventory), "-e", "gpu_path=vm", "--allow-reboot")
    assert code == 0 and again["hosts"]["pve1"]["changed"] == 0


def test_facts_show_what_the_roles_decide_from(lab):
    r = gpuhost("facts", "pve1", "-i", str(lab.inventory), "--json")
    assert r.returncode == 0, r.stderr
    facts = json.loads(r.stdout)["facts"]
    assert facts["boot_loader"].startswith("GRUB (not managed by proxmox-boot-tool)")
    assert facts["cmdline_file"] == "/etc/default/grub"
    assert len(facts["gpus"]) == 2 and all("10de:2bb5" in g for g in facts["gpus"])
    assert facts["cpu_vendor"] == "GenuineIntel"
