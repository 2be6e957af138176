"""A GPU a running guest holds is not taken from it (issue 31, "Wrong state": ``provision vm`` bound GPUs a running
container uses to vfio-pci without a word; a GPU already passed to another VM was not refused; ``provision lxc``
did not see a vfio binding).

On a lab node seeded with VM 110 holding both GPUs: the lab refuses a second VM on one GPU as qemu-server does;
``provision vm`` refuses, exit 2 and nothing changed on the node, a GPU another running VM or a running container
holds; ``provision lxc`` refuses GPUs that vfio-pci binds at boot.
"""

import pytest
from ruamel.yaml import YAML

from tests.integration.provision.conftest import gpuhost, run_json

pytestmark = pytest.mark.integration

TEMPLATE = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"
#: what provision vm would change first: the command line, modules, vfio options and the initramfs
STATE = (
    "sha256sum /etc/default/grub /etc/modules /boot/initrd.img-* 2>&1; ls /etc/modprobe.d; "
    "cat /etc/pve/qemu-server/110.conf"
)


@pytest.fixture(scope="module")
def lab(make_lab):
    return make_lab([("grub", "intel")], gpus=2, gpu_vm=110)


@pytest.fixture(scope="module")
def gpu0(lab) -> str:
    return lab.run("pve1", "lspci -D -n -d 10de: | head -1").stdout.split()[0]


def test_1_the_lab_refuses_a_second_vm_on_a_gpu_a_running_vm_holds(lab, gpu0):
    assert lab.run("pve1", "qm start 110").rc == 0
    assert lab.run("pve1", f"qm create 111 --hostpci0 {gpu0} --memory 1024").rc == 0
    r = lab.run("pve1", "qm start 111")
    # qemu-server PCI.pm reserve_pci_usage: die "PCI device '$id' already in use by VMID '$reservation->{vmid}'"
    assert r.rc != 0 and f"PCI device '{gpu0}' already in use by VMID '110'" in r.stdout + r.stderr
    assert "status: stopped" in lab.run("pve1", "qm status 111").stdout
    assert lab.run("pve1", "qm destroy 111").rc == 0


def test_2_provision_vm_refuses_a_gpu_another_running_vm_holds(lab, gpu0, tmp_path):
    yaml = YAML()
    doc = yaml.load(lab.inventory.read_text())
    doc["nodes"]["pve1"]["vms"][111] = {"gpus": [gpu0]}
    inv = lab.inventory.parent / "inventory-vm111.yml"
    yaml.dump(doc, inv)
    before = lab.run("pve1", STATE).stdout
    code, report = run_json("provision", "vm", "-i", str(inv), "--vmid", "111", "--allow-reboot", "--allow-restart")
    errors = [t["error"] for t in report["tasks"] if t["status"] == "failed"]
    assert code == 2, errors
    assert f"GPU {gpu0} of VM 111 is held by the running VM 110" in errors[0]
    assert "nothing was changed" in errors[0]
    assert lab.run("pve1", STATE).stdout == before
    assert lab.run("pve1", "qm status 111").rc != 0  # not created


def test_3_provision_vm_refuses_to_bind_a_gpu_a_running_container_uses(lab):
    assert lab.run("pve1", "qm stop 110").rc == 0
    made = lab.run("pve1", f"pct create 200 {TEMPLATE} --hostname gpu200 --memory 512 --rootfs local-lvm:4")
    assert made.rc == 0, made.stderr
    # the GPU as a bind mount (PVE before 8.1, and pve-container's lxc.mount.entry pass-through)
    lab.run(
        "pve1",
        "echo 'lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file' >> /etc/pve/lxc/200.conf",
    )
    assert lab.run("pve1", "pct start 200").rc == 0
    before = lab.run("pve1", STATE).stdout
    for check in (["--check"], ["--allow-reboot", "--allow-restart"]):
        code, report = run_json("provision", "vm", "-i", str(lab.inventory), *check)
        errors = [t["error"] for t in report["tasks"] if t["status"] == "failed"]
        assert code == 2, errors
        assert "CT 200 (gpu200) is running with GPU /dev/nvidia0" in errors[0] and "vfio-pci ids=10de:" in errors[0]
        assert lab.run("pve1", STATE).stdout == before
    assert lab.run("pve1", "pct stop 200").rc == 0


def test_4_provision_lxc_refuses_gpus_vfio_pci_binds_at_boot(lab):
    lab.run("pve1", "echo 'options vfio-pci ids=10de:2bb5' > /etc/modprobe.d/gpuhost-vfio.conf")
    r = gpuhost("provision", "lxc", "-i", str(lab.inventory), "--check")
    out = r.stdout + r.stderr
    assert r.returncode == 2, out
    assert "'options vfio-pci ids=' in /etc/modprobe.d/gpuhost-vfio.conf binds the GPUs at every boot" in out
    assert "a container cannot use a GPU bound to vfio-pci" in out
