"""VM checks and lints, round two (issue 30), on qemu-server's own cfg2cmd files (tests/fixtures/pve/SOURCE.md)."""

from pathlib import Path

import pytest

from gpuhost.checks import Level
from gpuhost.checks.vm import functions, pcie
from gpuhost.errors import OperationFailed
from gpuhost.facts.vm import vm_config
from gpuhost.operations.vm import VmConfig, VmConfigArgs, VmGpu
from gpuhost.pve import config as pveconf
from gpuhost.pve import vm_gpu
from gpuhost.pve.vm_gpu import GpuRef
from tests.unit.pve.test_vm_gpu import FakeHost

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "pve" / "qemu-server"
MULTI = vm_gpu.parse_showcmd((FIX / "8006-q35-linux-hostpci-multifunction.conf.cmd").read_text())


def test_multifunction_pass_on_pci0_fails_instead_of_passing_with_zero_gpus():
    assert MULTI.vfio["hostpci0.0"] == ("0000:f0:43.0", "pci.0")
    f = pcie(MULTI, {0: GpuRef(pci="0000:f0:43.0")}, "VM 8006")
    assert f.level is Level.FAIL
    assert f.message == "hostpci0.0 sits on pci.0, not on a PCIe root port (pcie=1)"


def test_nothing_placed_is_not_a_pass():
    f = pcie(MULTI, {}, "VM 8006")
    assert f.level is Level.WARN and "nothing placed" in f.message


def test_a_function_1_pass_is_named_as_function_1():
    # hostpci1's entry passes host=1234:f0:43.1 (the command line says so); the GPU is function .0 of that slot
    options = {"machine": "q35", "hostpci1": "1234:f0:43.1"}
    f = functions(MULTI, options, (GpuRef(pci="1234:f0:43.0"),), "VM 8006")
    assert f.level is Level.FAIL
    assert "hostpci1 passes 1234:f0:43.1: function .1, not the GPU's function .0 (1234:f0:43.0)" in f.message


def test_two_functions_of_one_slot_in_two_entries_are_not_a_duplicate():
    # qemu-server's q35-linux-hostpci-driver-keep.conf: hostpci3 d0:15.1 and hostpci7 d0:15.2
    conf = pveconf.parse((FIX / "8006-q35-linux-hostpci-driver-keep.conf").read_text(), "qemu").main.options
    assert not [p for p in vm_gpu.lint(conf) if "same host device" in p]


def test_one_device_in_two_entries_is_refused():
    """Scenario (a configuration written for the test); QEMU's refusal is 'vfio error: 0000:5c:00.0: device is
    already attached' (kata-containers/runtime#1712)."""
    opts = {"machine": "q35", "hostpci0": "0000:41:00.0,pcie=1", "hostpci1": "41:00,pcie=1"}
    (problem,) = [p for p in vm_gpu.lint(opts) if "same host device" in p]
    assert problem.startswith("hostpci0 ('0000:41:00.0') and hostpci1 ('41:00') pass the same host device 0000:41:00.0")


def test_a_real_written_config_passing_a_slot_and_its_function_is_refused():
    # a public GPU passthrough guide's /etc/pve/qemu-server/201.conf (tests/fixtures/pve/SOURCE.md): hostpci0
    # "01:00" (every function of the slot, so 01:00.0 and 01:00.1) and hostpci1 "01:00.1" again
    conf = pveconf.parse((FIX / "201-guide-slot-and-its-function-twice.conf").read_text(), "qemu").main.options
    (problem,) = [p for p in vm_gpu.lint(conf) if "same host device" in p]
    assert problem.startswith("hostpci0 ('01:00') and hostpci1 ('01:00.1') pass the same host device 0000:01:00.1")
    assert "keep one entry per device" in problem


def test_configuring_the_gpu_of_the_real_config_names_its_function_and_ends_the_duplicate():
    conf = pveconf.parse((FIX / "201-guide-slot-and-its-function-twice.conf").read_text(), "qemu")
    plan = VmConfig(VmConfigArgs(vmid=201, gpus=[VmGpu(pci="0000:01:00.0", clique=None)])).plan(
        FakeHost({vm_config: conf})
    )
    assert plan.reason == "VM 201: set hostpci0"
    assert "-hostpci0: 01:00,pcie=1,x-vga=1\n" in plan.diff and "+hostpci0: 01:00.0,pcie=1,x-vga=1\n" in plan.diff
    after = {**vm_gpu.effective(conf), "hostpci0": "01:00.0,pcie=1,x-vga=1"}
    assert not [p for p in vm_gpu.lint(after) if "same host device" in p]


def test_adding_gpus_to_the_real_config_is_refused_naming_the_duplicate_and_changes_nothing():
    conf = pveconf.parse((FIX / "201-guide-slot-and-its-function-twice.conf").read_text(), "qemu")
    op = VmConfig(VmConfigArgs(vmid=201, gpus=[VmGpu(pci="0000:41:00.0", clique=None)]))
    with pytest.raises(OperationFailed, match="nothing was changed") as err:
        op.plan(FakeHost({vm_config: conf}))
    assert "hostpci0 ('01:00') and hostpci1 ('01:00.1') pass the same host device 0000:01:00.1" in str(err.value)


GUIDE2 = FIX / "vmid-rocm-guide-slot-and-its-audio-function-twice.conf"


def test_a_second_written_config_passing_a_slot_and_its_audio_function_is_refused():
    # a second public guide (Proxmox AI workloads on an RX 7900 XTX, tests/fixtures/pve/SOURCE.md): hostpci0
    # "0000:03:00" is every function of the slot (the GPU .0 and its HDMI audio .1), and hostpci1 passes .1 again
    conf = pveconf.parse(GUIDE2.read_text(), "qemu").main.options
    (problem,) = [p for p in vm_gpu.lint(conf) if "same host device" in p]
    assert problem.startswith(
        "hostpci0 ('0000:03:00') and hostpci1 ('0000:03:00.1') pass the same host device 0000:03:00.1"
    )
    assert "keep one entry per device" in problem


def test_adding_a_gpu_to_the_second_guide_config_is_refused_and_changes_nothing():
    conf = pveconf.parse(GUIDE2.read_text(), "qemu")
    op = VmConfig(VmConfigArgs(vmid=120, gpus=[VmGpu(pci="0000:41:00.0", clique=None)]))
    with pytest.raises(OperationFailed, match="nothing was changed") as err:
        op.plan(FakeHost({vm_config: conf}))
    assert "hostpci0 ('0000:03:00') and hostpci1 ('0000:03:00.1') pass the same host device 0000:03:00.1" in str(
        err.value
    )


def test_the_same_slot_in_two_pci_domains_is_not_a_duplicate():
    # qemu-server's own q35-linux-hostpci-multifunction.conf: hostpci0 f0:43 (domain 0000) and hostpci1 1234:f0:43;
    # its .conf.cmd shows QEMU given 0000:f0:43.0, 0000:f0:43.1 and 1234:f0:43.1: three devices, no refusal
    conf = pveconf.parse((FIX / "8006-q35-linux-hostpci-multifunction.conf").read_text(), "qemu").main.options
    assert not [p for p in vm_gpu.lint(conf) if "same host device" in p]
    hosts = sorted(v[0] for v in MULTI.vfio.values())
    assert hosts == ["0000:f0:43.0", "0000:f0:43.1", "1234:f0:43.1"]
