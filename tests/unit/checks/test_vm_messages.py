"""The VM proofs' findings whole (subject, message, fix), for a VM passed its GPU wrongly and rightly. The KVM
command lines are written as ``qm showcmd`` prints them (qemu-server ``PVE::QemuServer::config_to_command``);
gpuhost has no real capture of one yet (tests/unit/pve/test_vm_gpu.py)."""

from __future__ import annotations

from gpuhost.checks.finding import Level
from gpuhost.checks.vm import cmdline_findings
from gpuhost.pve import vm_gpu
from gpuhost.pve.vm_gpu import GpuRef

OPTS = {"hostpci0": "0000:41:00.0,pcie=1"}
GPU = (GpuRef(pci="0000:41:00.0", clique=0),)
FIX = "gpuhost provision vm --allow-restart"


def test_every_proof_of_a_wrong_command_line_names_the_vm_and_the_fix() -> None:
    text = (
        "/usr/bin/kvm -id 100 -cpu 'kvm64,enforce,kvm=off' "
        "-device 'vfio-pci,host=0000:41:00.0,id=hostpci0,bus=pci.0,addr=0x10' -machine 'type=pc+pve0'"
    )
    found = cmdline_findings(vm_gpu.parse_showcmd(text), OPTS, GPU, "VM 100")
    assert [(f.level, f.check, f.subject, f.message, f.cause, f.fix) for f in found] == [
        (Level.FAIL, "vm.q35", "VM 100", "-machine type=pc+pve0 is not q35", None, FIX),
        (
            Level.FAIL,
            "vm.no_kvm_off",
            "VM 100",
            "-cpu carries kvm=off (hidden=1 or x-vga=1): the NVIDIA driver ignores cliques",
            None,
            FIX,
        ),
        (Level.PASS, "vm.functions", "VM 100", "1 GPUs as vfio-pci hostpciN, function .0", None, None),
        (Level.FAIL, "vm.pcie", "VM 100", "hostpci0 sits on pci.0, not on a PCIe root port (pcie=1)", None, FIX),
        (Level.FAIL, "vm.cliques", "VM 100", "no '-set device.hostpci0.x-nv-gpudirect-clique=0'", None, FIX),
    ]


def test_two_problems_of_one_proof_are_joined() -> None:
    opts = {"hostpci0": "0000:41:00,pcie=1"}
    text = "/usr/bin/kvm -id 100 -cpu host -device 'vfio-pci,host=0000:c1:00.0,id=hostpci0,bus=ich9-pcie-port-1' -machine q35"
    found = {
        f.check: f for f in cmdline_findings(vm_gpu.parse_showcmd(text), opts, (GpuRef(pci="0000:41:00"),), "VM 7")
    }
    assert (
        found["vm.functions"].message
        == "hostpci0 '0000:41:00,pcie=1' names no function .0; hostpci0 passes 0000:c1:00.0, not 0000:41:00"
    )


def test_a_right_command_line_passes_with_what_it_saw() -> None:
    text = (
        "/usr/bin/kvm -id 100 -cpu host -device 'vfio-pci,host=0000:41:00.0,id=hostpci0,bus=ich9-pcie-port-1,addr=0x0' "
        "-machine 'type=q35+pve0' -set device.hostpci0.x-nv-gpudirect-clique=0"
    )
    found = cmdline_findings(vm_gpu.parse_showcmd(text), OPTS, GPU, "VM 100")
    assert [(f.level, f.check, f.subject, f.message) for f in found] == [
        (Level.PASS, "vm.q35", "VM 100", "-machine type=q35+pve0"),
        (Level.PASS, "vm.no_kvm_off", "VM 100", "no kvm=off"),
        (Level.PASS, "vm.functions", "VM 100", "1 GPUs as vfio-pci hostpciN, function .0"),
        (Level.PASS, "vm.pcie", "VM 100", "1 vfio-pci GPUs on PCIe root ports"),
        (Level.PASS, "vm.cliques", "VM 100", "cliques 0"),
    ]
