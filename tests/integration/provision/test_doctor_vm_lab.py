"""`gpuhost doctor` on the seeds' VM (seed 004): a Proxmox VM whose GPUs sit on i440fx as bare hostpci ids, no
pcie=1, no GPUDirect clique, so its driver reports P2P off between every pair (13.7 µs a small copy). Doctor
names the VM's machine type as the top finding, the P2P consequences after it, and the command it prints, run,
makes them go away on the next doctor run."""

import shlex

import pytest
from ruamel.yaml import YAML

from tests.integration.provision.conftest import gpuhost, run_json

pytestmark = pytest.mark.integration

VMID = 110


@pytest.fixture(scope="module")
def lab(make_lab):
    handle = make_lab([("grub", "intel")], gpus=2, gpu_vm=VMID)
    yaml = YAML()
    doc = yaml.load(handle.inventory.read_text())
    doc["nodes"]["pve1"]["vars"]["gpu_path"] = "vm"  # the host hands its GPUs to vfio-pci for the VM
    doc["nodes"]["pve1"].pop("containers", None)  # the seeds' VM path: no container on this node
    with (handle.inventory.parent / "doctor-vm.yml").open("w") as out:
        yaml.dump(doc, out)
    inv = handle.inventory.parent / "doctor-vm.yml"
    code, report = run_json("provision", "host", "-i", str(inv), "--allow-reboot")
    assert code == 0, [t.get("error") for t in report["tasks"] if t["status"] == "failed"]
    assert handle.run("pve1", f"qm start {VMID}").rc == 0  # the seeds' VM as it ran: i440fx, bare ids
    return handle


def test_the_seeds_vm_with_p2p_off_is_named_by_its_machine_type_and_provision_vm_clears_it(lab):
    inv = lab.inventory.parent / "doctor-vm.yml"
    conf = lab.run("pve1", f"cat /etc/pve/qemu-server/{VMID}.conf").stdout
    assert "machine" not in conf and "hostpci0: 0000:03:00\n" in conf  # staged as seed 004 found it
    code, doc = run_json("doctor", "-i", str(inv))
    assert code == 1
    checks = [(f["check"], f["subject"]) for f in doc["findings"]]
    top = doc["findings"][0]
    assert (top["check"], top["subject"], top["level"]) == ("vm.q35", f"pve1/VM {VMID}", "FAIL")
    assert top["message"] == "-machine type=pc+pve0 is not q35"
    assert top["command"] == f"gpuhost provision vm -i {inv} --limit pve1 --vmid {VMID} --allow-reboot --allow-restart"
    # what i440fx explains comes right after it: the GPUs on the plain PCI bus; then the bare ids (a multifunction
    # device that can take no clique) and the missing cliques: together, no P2P for the guest's driver
    assert checks[1] == ("vm.pcie", f"pve1/VM {VMID}"), checks
    assert doc["findings"][1]["explained_by"] == {"check": "vm.q35", "subject": f"pve1/VM {VMID}"}
    assert "not on a PCIe root port (pcie=1)" in doc["findings"][1]["message"]
    assert {("vm.functions", f"pve1/VM {VMID}"), ("vm.cliques", f"pve1/VM {VMID}")} <= set(checks[2:]), checks

    words = shlex.split(top["command"])
    r = gpuhost(*words[1:], timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    _code, after = run_json("doctor", "-i", str(inv))
    assert not [f for f in after["findings"] if f["check"].startswith("vm.")], after["findings"]
