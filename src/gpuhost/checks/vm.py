"""VM proofs: pure functions from what ``qm showcmd``, the VM's configuration, the host and the guest show.

``gpuhost provision vm`` (its ``qm showcmd`` proof), ``gpuhost verify vm`` and the acceptance suite call
these; :func:`cmdline_findings` is every command-line proof at once. The guest's P2P status is judged by
:func:`gpuhost.p2p.guest.guest_p2p` (it needs the P2P judge, which sits above the checks).
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuhost.checks.finding import Finding, Level, check
from gpuhost.facts.host import HostFacts
from gpuhost.facts.vm import GuestDriver
from gpuhost.pve import vm_gpu
from gpuhost.pve.vm_gpu import GpuRef, KvmCmdline

PROVISION = "gpuhost provision vm --allow-restart"


def _result(name: str, subject: str, problems: list[str], ok: str, cause: str | None = None) -> Finding:
    if problems:
        return Finding(Level.FAIL, name, subject, "; ".join(problems), cause=cause, fix=PROVISION)
    return Finding(Level.PASS, name, subject, ok)


@check(
    "vm.running",
    group="vm",
    title="The VM runs",
    meaning="a stopped VM proves nothing about what QEMU runs, and its guest cannot be reached",
    fix="qm start VMID (or gpuhost provision vm)",
)
def running(status: str | None, subject: str, vmid: int) -> Finding:
    if status != "running":
        return Finding(Level.FAIL, "vm.running", subject, f"VM {vmid} is {status or 'absent'}", fix=f"qm start {vmid}")
    return Finding(Level.PASS, "vm.running", subject, f"VM {vmid} running")


@check(
    "vm.q35",
    group="vm",
    title="QEMU runs the q35 machine",
    meaning="i440fx has no PCIe root ports: the guest's NVIDIA driver reports P2P 'chipset not supported'",
    fix="machine: q35 in the VM's configuration, then a cold restart (gpuhost provision vm --allow-restart)",
)
def q35(cmd: KvmCmdline, subject: str) -> Finding:
    problems = [] if "q35" in cmd.machine else [f"-machine type={cmd.machine or '?'} is not q35"]
    return _result("vm.q35", subject, problems, f"-machine type={cmd.machine}")


@check(
    "vm.functions",
    group="vm",
    title="Each GPU is passed as its own vfio-pci device, function .0, as hostpciN",
    meaning="a GPU passed without its function (bus:dev) becomes a multifunction device hostpciN.0, and a "
    "clique set on hostpciN then matches no device",
    fix="hostpciN: <bus>:<dev>.0,pcie=1 per GPU (gpuhost provision vm --allow-restart)",
)
def functions(cmd: KvmCmdline, options: Mapping[str, str], gpus: tuple[GpuRef, ...], subject: str) -> Finding:
    placed = vm_gpu.gpu_indices(options, gpus)
    problems = [f"no hostpci entry for GPU {r.key()}" for r in gpus if r not in placed.values()]
    entries = vm_gpu.hostpci_entries(options)
    for index, gpu in sorted(placed.items()):
        dev = f"hostpci{index}"
        if gpu.pci and any("." not in i.rsplit(":", 1)[-1] for i in vm_gpu.hostpci_ids(entries[index])):
            problems.append(f"{dev} '{entries[index]}' names no function .0")
        if dev not in cmd.vfio:
            problems.append(f"no '-device vfio-pci,…,id={dev}' (a multifunction id {dev}.0 cannot take a clique)")
            continue
        host = cmd.vfio[dev][0]
        if gpu.pci and vm_gpu.slot(host) != vm_gpu.slot(gpu.pci):
            problems.append(f"{dev} passes {host}, not {gpu.pci}")
        elif gpu.pci and (want := _fn(gpu.pci)) is not None and (got := _fn(host)) is not None and want != got:
            problems.append(f"{dev} passes {host}: function .{got}, not the GPU's function .{want} ({gpu.pci})")
    return _result("vm.functions", subject, problems, f"{len(placed)} GPUs as vfio-pci hostpciN, function .0")


def _fn(pci_id: str) -> str | None:
    """The function digit of a PCI address (``0000:41:00.1`` → ``1``), None when it names none."""
    tail = pci_id.rsplit(":", 1)[-1]
    return tail.split(".", 1)[1] if "." in tail else None


@check(
    "vm.pcie",
    group="vm",
    title="Each GPU sits on a PCIe root port (pcie=1)",
    meaning="a GPU on the plain PCI bus is not a PCIe device to the guest: no P2P, and lower bandwidth",
    fix="pcie=1 on each hostpciN (q35 only), then a cold restart",
)
def _vfio_device(cmd: KvmCmdline, index: int) -> tuple[str, tuple[str, str]] | None:
    """The ``-device vfio-pci`` of hostpciN: ``hostpciN``, or ``hostpciN.0`` when PVE passed the slot's functions
    as one multifunction device (an id without a function)."""
    for dev in (f"hostpci{index}", f"hostpci{index}.0"):
        if dev in cmd.vfio:
            return dev, cmd.vfio[dev]
    return None


def pcie(cmd: KvmCmdline, placed: Mapping[int, GpuRef], subject: str) -> Finding:
    if not placed:
        return Finding(Level.WARN, "vm.pcie", subject, "no GPU of the VM's configuration to check (nothing placed)")
    problems = []
    on = 0
    for index in sorted(placed):
        found = _vfio_device(cmd, index)
        if found is None:
            problems.append(f"hostpci{index}: no '-device vfio-pci' on QEMU's command line")
            continue
        dev, (_host, bus) = found
        if bus.startswith("ich9-pcie-port-"):
            on += 1
        else:
            problems.append(f"{dev} sits on {bus or 'no bus'}, not on a PCIe root port (pcie=1)")
    return _result("vm.pcie", subject, problems, f"{on} vfio-pci GPUs on PCIe root ports")


@check(
    "vm.cliques",
    group="vm",
    title="QEMU sets each GPU's GPUDirect clique (x-nv-gpudirect-clique)",
    meaning="without a clique the guest's NVIDIA driver reports P2P 'chipset not supported' between the GPUs",
    fix="args: -set device.hostpciN.x-nv-gpudirect-clique=K per GPU (gpuhost provision vm --allow-restart)",
)
def cliques(cmd: KvmCmdline, placed: Mapping[int, GpuRef], subject: str) -> Finding:
    problems = [
        f"no '-set device.hostpci{i}.x-nv-gpudirect-clique={g.clique}'"
        for i, g in sorted(placed.items())
        if g.clique is not None and cmd.cliques.get(f"hostpci{i}") != str(g.clique)
    ]
    shown = sorted(set(cmd.cliques.values()))
    return _result("vm.cliques", subject, problems, f"cliques {','.join(shown) or 'none (clique: none)'}")


@check(
    "vm.no_kvm_off",
    group="vm",
    title="The guest sees KVM (no kvm=off)",
    meaning="kvm=off (cpu hidden=1, or x-vga=1 on a GPU) hides the hypervisor: the NVIDIA driver then ignores cliques",
    fix="drop hidden=1 from cpu and x-vga=1 from the hostpciN entries",
)
def no_kvm_off(cmd: KvmCmdline, subject: str) -> Finding:
    problems = ["-cpu carries kvm=off (hidden=1 or x-vga=1): the NVIDIA driver ignores cliques"] if cmd.kvm_off else []
    return _result("vm.no_kvm_off", subject, problems, "no kvm=off")


def cmdline_findings(
    cmd: KvmCmdline, options: Mapping[str, str], gpus: tuple[GpuRef, ...], subject: str
) -> list[Finding]:
    """Every proof of what QEMU runs for ``gpus`` (``options``: the running configuration)."""
    placed = vm_gpu.gpu_indices(options, gpus)
    return [
        q35(cmd, subject),
        no_kvm_off(cmd, subject),
        functions(cmd, options, gpus, subject),
        pcie(cmd, placed, subject),
        cliques(cmd, placed, subject),
    ]


@check(
    "vm.vfio_bound",
    group="vm",
    title="The VM's GPUs are bound to vfio-pci on the host",
    meaning="a GPU of the VM is held by another host driver: the VM cannot start with it passed through",
    fix="gpuhost provision host -e gpu_path=vm --allow-reboot",
)
def vfio_bound(facts: HostFacts, gpus: tuple[GpuRef, ...], subject: str) -> Finding | None:
    drivers = {vm_gpu.slot(g.bdf): g.driver for g in facts.gpus}
    mine = [g.pci for g in gpus if g.pci]
    if not mine:
        return None  # resource mappings: PVE picks the device
    wrong = [
        f"{p} ({drivers.get(vm_gpu.slot(p)) or 'absent'})" for p in mine if drivers.get(vm_gpu.slot(p)) != "vfio-pci"
    ]
    if wrong:
        return Finding(
            Level.FAIL,
            "vm.vfio_bound",
            subject,
            f"not bound to vfio-pci on the host: {', '.join(wrong[:3])}{'…' if len(wrong) > 3 else ''}",
            cause="options vfio-pci ids= missing, or initramfs not updated before the reboot",
            fix="gpuhost provision host -e gpu_path=vm --allow-reboot",
        )
    return Finding(Level.PASS, "vm.vfio_bound", subject, f"{len(mine)} GPUs bound to vfio-pci on the host")


@check(
    "vm.guest_driver",
    group="vm",
    title="The guest's NVIDIA kernel module is loaded and sees the VM's GPUs",
    meaning="the driver is not installed in the guest, its DKMS module was not built for the guest's kernel, "
    "or the GPUs did not arrive",
    fix="gpuhost provision vm (it installs the driver with DKMS inside the guest)",
)
def guest_driver(guest: GuestDriver, subject: str, want_gpus: int) -> Finding:
    if guest.module is None:
        return Finding(
            Level.FAIL,
            "vm.guest_driver",
            subject,
            "no NVIDIA kernel module loaded in the guest",
            fix="gpuhost provision vm",
        )
    if guest.gpus != want_gpus:
        return Finding(
            Level.FAIL,
            "vm.guest_driver",
            subject,
            f"NVIDIA {guest.module} loaded, nvidia-smi lists {guest.gpus} GPUs, expected {want_gpus}",
            fix=PROVISION,
        )
    return Finding(Level.PASS, "vm.guest_driver", subject, f"NVIDIA {guest.module} loaded, {guest.gpus} GPUs")


@check(
    "vm.guest_persistenced",
    group="vm",
    title="nvidia-persistenced runs in the guest",
    meaning="without it the driver tears down and re-initialises the GPUs between clients (slow first calls)",
    fix="systemctl enable --now nvidia-persistenced in the guest (gpuhost provision vm)",
)
def guest_persistenced(guest: GuestDriver, subject: str) -> Finding:
    if guest.persistenced != "active":
        return Finding(
            Level.FAIL,
            "vm.guest_persistenced",
            subject,
            f"nvidia-persistenced is {guest.persistenced or 'not running'} in the guest",
            fix="gpuhost provision vm",
        )
    return Finding(Level.PASS, "vm.guest_persistenced", subject, "nvidia-persistenced active in the guest")
