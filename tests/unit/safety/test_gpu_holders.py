"""Which running guest holds which GPU, read from real captures, and the refusals built on it (issue 31: ``provision
vm`` bound a running container's GPU to vfio-pci; a GPU another VM holds was not refused; ``provision lxc`` did not
see a vfio binding). The lab test of the same story is tests/integration/provision/test_gpu_holders.py.

Captures: ``qm list`` and ``pct list`` (tests/fixtures/cluster, SOURCE.md), a qemu-server test config with
hostpci entries and a container config passing /dev/nvidia0 (tests/fixtures/pve), the driver's Device Minor lines
of an 8-GPU node (tests/fixtures/host/nvidia, SOURCE.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhost.core.result import CommandResult
from gpuhost.errors import GpuConflict
from gpuhost.facts.batch import _MARK
from gpuhost.facts.boot import BootInfo
from gpuhost.facts.gpu_holders import GpuHolders, gpu_holders
from gpuhost.facts.hardware import IommuState, PciDevice
from gpuhost.facts.host import HostFacts, host_facts, parse_vfio_ids
from gpuhost.inventory.models import VMSpec
from gpuhost.roles import gpu_guard
from gpuhost.roles.proxmox_host import ProxmoxHost, ProxmoxHostVars
from gpuhost.runner.results import HostSummary, RunReport
from tests.support.scenario import ScenarioHost

FIX = Path(__file__).resolve().parents[2] / "fixtures"
QM = (FIX / "cluster/qm-list/ovh1-two-running.txt").read_text()  # VMs 202 discourse, 203 monitoring: running
PCT = (FIX / "cluster/pct-list/pmx5-14-containers.txt").read_text()  # 105 dm-gitlab running, 117 stopped
VM_CONF = (FIX / "pve/qemu-server/8006-q35-linux-hostpci-driver-keep.conf").read_text()  # hostpci1: d0:13.0,…
CT_CONF = (FIX / "pve/lxc/250-machine-learning-nvidia.conf").read_text()  # lxc.mount.entry: /dev/nvidia0 …
MINORS = (FIX / "host/nvidia/grep-device-minor-8gpu-minor-not-ordinal.txt").read_text()  # minor 0: 0000:48:00.0


def _sections(**outputs: str) -> str:
    return "".join(f"{_MARK} {key}\n{text}\n{_MARK}-status 0\n" for key, text in outputs.items())


def _confs(kind: str, confs: dict[int, str]) -> str:
    return "".join(f"@@gpuhost-conf@@ /etc/pve/{kind}/{i}.conf\n{text}" for i, text in confs.items())


def read() -> GpuHolders:
    out = _sections(
        qm=QM,
        pct=PCT,
        vm_conf=_confs("qemu-server", {202: VM_CONF}),
        ct_conf=_confs("lxc", {105: CT_CONF, 117: CT_CONF}),
        minors=MINORS,
    )
    return gpu_holders(CommandResult(command="", exit_code=0, stdout=out, stderr=""))


def gpu(bdf: str, driver: str | None = "nvidia") -> PciDevice:
    return PciDevice(bdf, "0302", "3D controller", "NVIDIA A100", "10de", "20b5", driver)


def test_running_guests_and_the_gpus_they_hold() -> None:
    h = read()
    assert [(x.kind, x.id, x.name) for x in h.holders] == [("VM", 202, "discourse"), ("CT", 105, "dm-gitlab")]
    vm, ct = h.holders
    assert vm.devices == (
        "0000:00:ff.1",
        "0000:d0:13.0",
        "0000:00:f4.0",
        "0000:d0:15.1",
        "0000:d0:17.0",
        "0000:d0:15.2",
    )
    assert ct.devices == ("0000:48:00.0",)  # /dev/nvidia0 is minor 0, not the first GPU in PCI order
    assert h.minors[2] == "0000:07:00.0"
    assert [str(x) for x in h.holding("0000:d0:13.0")] == ["VM 202 (discourse)"]
    assert h.holding("0000:d0:13.0", besides=202) == []


def test_without_the_nvidia_module_the_device_node_is_named() -> None:
    out = _sections(qm="", pct=PCT, vm_conf="", ct_conf=_confs("lxc", {105: CT_CONF}), minors="")
    h = gpu_holders(CommandResult(command="", exit_code=0, stdout=out, stderr=""))
    assert [x.devices for x in h.holders] == [("/dev/nvidia0",)]


def test_vfio_over_a_running_containers_gpu_is_refused_naming_both() -> None:
    with pytest.raises(GpuConflict) as info:
        gpu_guard.vfio_over_containers([gpu("0000:07:00.0"), gpu("0000:48:00.0")], read(), ["10de:20b5"])
    text = str(info.value)
    assert "CT 105 (dm-gitlab) is running with GPU 0000:48:00.0" in text and "vfio-pci ids=10de:20b5" in text
    assert "nothing was changed" in text and info.value.exit_code == 2


def test_vfio_of_another_model_leaves_the_container_alone() -> None:
    gpu_guard.vfio_over_containers([gpu("0000:48:00.0")], read(), ["10de:2bb5"])


def test_a_gpu_another_running_vm_holds_is_refused() -> None:
    with pytest.raises(GpuConflict) as info:
        gpu_guard.vm_gpus_free(300, ["0000:d0:13.0"], read())
    assert "GPU 0000:d0:13.0 of VM 300 is held by the running VM 202 (discourse)" in str(info.value)
    assert "already in use by VMID" in str(info.value)
    gpu_guard.vm_gpus_free(202, ["0000:d0:13.0"], read())  # its own GPU


def test_the_lxc_path_refuses_gpus_gpuhost_binds_to_vfio() -> None:
    own = "/etc/modprobe.d/gpuhost-vfio.conf"
    with pytest.raises(GpuConflict) as info:
        gpu_guard.containers_can_use(
            [gpu("0000:48:00.0")], parse_vfio_ids(f"{own}:options vfio-pci ids=10de:20b5\n"), own, read
        )
    assert f"'options vfio-pci ids=' in {own} binds the GPUs at every boot" in str(info.value)
    with pytest.raises(GpuConflict, match="bound to vfio-pci now"):
        gpu_guard.containers_can_use([gpu("0000:48:00.0", "vfio-pci")], {}, own, read)
    # the operator's own file binding one model of two: the others serve containers
    mixed = parse_vfio_ids("/etc/modprobe.d/vm.conf:options vfio-pci ids=10de:20b5\n")
    gpu_guard.containers_can_use([gpu("0000:48:00.0"), gpu("0000:07:00.0", "nvidia")], mixed, own, read)


def test_a_run_whose_failed_hosts_were_all_refused_exits_2() -> None:
    report = RunReport("p.yml", False, hosts={"a": HostSummary(failed=1, refused=True), "b": HostSummary(ok=3)})
    assert report.exit_code == 2
    report.hosts["b"] = HostSummary(failed=1)
    assert report.exit_code == 1


# ---- the roles refuse before any task exists (a ScenarioHost: facts from the captures above, no connection)


def _host_facts(*gpus: PciDevice, vfio_ids: dict[str, str] | None = None) -> HostFacts:
    return HostFacts(
        cpu_vendor="amd",
        kernel="6.8.12-4-pve",
        pve_version=None,
        boot=BootInfo("systemd-boot", True, "uefi", ("7D41-3B3A",)),
        grub_effective_tokens=None,
        kernel_cmdline_tokens=("root=ZFS=rpool/ROOT/pve-1", "boot=zfs"),
        booted_tokens=("boot=zfs",),
        iommu=IommuState(None, True, ()),
        iommu_groups={},
        gpus=gpus,
        modules=frozenset(),
        nvidia=None,
        nvidia_installed=None,
        char_majors={},
        nvidia_devices=(),
        vfio_ids=vfio_ids or {},
    )


PIN = {"version": "580.95.05", "url": "https://example.invalid/NVIDIA-Linux-x86_64-580.95.05.run", "sha256": "a" * 64}


def test_provision_vm_s_host_path_refuses_a_running_container_s_gpu() -> None:
    host = ScenarioHost({host_facts: _host_facts(gpu("0000:48:00.0")), gpu_holders: read()})
    with pytest.raises(GpuConflict, match=r"CT 105 \(dm-gitlab\) is running with GPU 0000:48:00.0"):
        ProxmoxHost().tasks(host, ProxmoxHostVars(gpu_path="vm"))


def test_provision_vm_s_host_path_refuses_a_vm_s_gpu_another_running_vm_holds() -> None:
    d0 = PciDevice("0000:d0:13.0", "0302", "3D controller", "NVIDIA A100", "10de", "20b5", "vfio-pci")
    host = ScenarioHost({host_facts: _host_facts(d0), gpu_holders: read()})
    held = ProxmoxHostVars(gpu_path="vm", vms={300: VMSpec(gpus=["0000:d0:13.0"])})
    with pytest.raises(GpuConflict, match=r"GPU 0000:d0:13.0 of VM 300 is held by the running VM 202"):
        ProxmoxHost().tasks(host, held)
    own = ProxmoxHostVars(gpu_path="vm", vms={202: VMSpec(gpus=["0000:d0:13.0"])})
    assert ProxmoxHost().tasks(ScenarioHost({host_facts: _host_facts(d0), gpu_holders: read()}), own)


def test_the_lxc_host_path_refuses_gpus_gpuhost_binds_to_vfio() -> None:
    # the host facts' modprobe.d line decides; the holders are read to word the refusal
    seen = _host_facts(gpu("0000:48:00.0"), vfio_ids={"10de:20b5": "/etc/modprobe.d/gpuhost-vfio.conf"})
    host = ScenarioHost({host_facts: seen, gpu_holders: read()})
    with pytest.raises(GpuConflict, match="a container cannot use a GPU bound to vfio-pci"):
        ProxmoxHost().tasks(host, ProxmoxHostVars(gpu_path="lxc", nvidia_driver=PIN))
    # no binding in the host facts: the LXC path reads no holders (a converged node costs no extra round trip)
    bare = ScenarioHost({host_facts: _host_facts(gpu("0000:48:00.0"))})
    assert ProxmoxHost().tasks(bare, ProxmoxHostVars(gpu_path="lxc", nvidia_driver=PIN))
