"""KVM guests on a Proxmox VE node: the GPU configuration (q35, ``pcie=1``, GPUDirect cliques),
applied through PVE's own semantics, the restart only with consent, and the proof from ``qm showcmd``.

The configuration goes through ``PUT /nodes/{node}/qemu/{vmid}/config`` with the ``digest`` of the
file gpuhost planned from, so an edit made meanwhile by someone else makes PVE refuse the write
(and is kept). On a running VM, PVE stages what it cannot hot-plug (``machine``, ``hostpciN``,
``args``, …) in the ``[PENDING]`` section; it applies at the next cold start. ``args`` and raw
``hostpciN`` are root@pam-only keys, so the API client sends this call as root over SSH.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from gpuhost.checks.vm import cmdline_findings
from gpuhost.core.actions import PveCall, RestartGuest
from gpuhost.core.guest import Guest
from gpuhost.core.operation import Args, Operation, SkipTask
from gpuhost.core.plan import Plan, nothing, unified_diff
from gpuhost.errors import OperationFailed
from gpuhost.facts.pve import node_name
from gpuhost.facts.vm import vm_config, vm_config_path, vm_showcmd, vm_status
from gpuhost.operations.guest import InGuestArgs, InGuestOperation
from gpuhost.pve import vm_gpu

if TYPE_CHECKING:
    from gpuhost.core.context import HostContext


class VmGpu(Args):
    """One GPU: a host PCI address, or a PVE resource mapping id; its clique (None: no clique)."""

    pci: str | None = None
    mapping: str | None = None
    clique: int | None = None

    def ref(self) -> vm_gpu.GpuRef:
        return vm_gpu.GpuRef(pci=self.pci, mapping=self.mapping, clique=self.clique)


class VmConfigArgs(Args):
    vmid: int = Field(description="the VM's id")
    gpus: list[VmGpu] = Field(description="the GPUs passed through, each with its hostpci slot and clique")
    bios: Literal["keep", "ovmf"] = Field(default="keep", description="keep the firmware, or switch to OVMF (UEFI)")
    efidisk: str | None = Field(default=None, description="storage for the efidisk0 OVMF needs (STORAGE:1)")
    cpu_host: bool = Field(default=True, description="cpu: host (the guest sees the real CPU)")
    options: dict[str, str] = Field(default={}, description="more VM options gpuhost sets as given (key: value)")


def _want(a: VmConfigArgs) -> vm_gpu.VmWant:
    return vm_gpu.VmWant(
        gpus=tuple(g.ref() for g in a.gpus),
        bios=a.bios,
        efidisk=a.efidisk,
        cpu_host=a.cpu_host,
        options=dict(a.options),
    )


def _absent(host: HostContext, vmid: int) -> Plan:
    raise OperationFailed(
        f"VM {vmid} does not exist on {host.name} ({vm_config_path(vmid)} is missing): create it first "
        "(gpuhost configures an existing VM's GPUs; it does not install guest operating systems)"
    )


class VmConfig(Operation[VmConfigArgs]):
    """The VM's GPU configuration as :mod:`gpuhost.pve.vm_gpu` wants it; lints refuse before writing."""

    kind = "vm_gpu_config"
    Args = VmConfigArgs

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        conf = host.fact(vm_config, a.vmid)
        if conf is None:
            return _absent(host, a.vmid)
        current = vm_gpu.effective(conf)
        want = vm_gpu.wanted(current, _want(a))
        after = vm_gpu.merged(current, want.values)
        problems = vm_gpu.lint(after)
        if problems:
            raise OperationFailed(
                f"VM {a.vmid}: refusing to write this configuration (nothing was changed):\n  - "
                + "\n  - ".join(problems)
            )
        if not want.values:
            return nothing(f"VM {a.vmid}: q35, {len(a.gpus)} GPUs with pcie=1 and their cliques already configured")
        params: list[tuple[str, str]] = [(k, v) for k, v in sorted(want.values.items()) if v is not None]
        deletes = sorted(k for k, v in want.values.items() if v is None)
        if deletes:
            params.append(("delete", ",".join(deletes)))
        node = host.fact(node_name)
        running = host.fact(vm_status, a.vmid) == "running"
        preview = _preview(conf.text(), want.values)
        reason = f"VM {a.vmid}: set {', '.join(sorted(want.values))}"
        if running:
            reason += " (running: PVE keeps what it cannot hot-plug pending until a restart)"
        for note in want.notes:
            reason += f"; NOTE: {note}"
        return Plan(
            reason=reason,
            # the digest rides in the call, so a concurrent edit (qemu-server's "checksum mismatch (file
            # change by other user?)", API2/Qemu.pm:2211) re-plans instead of failing the run
            actions=[PveCall("put", f"nodes/{node}/qemu/{a.vmid}/config", tuple(params), digest=conf.digest)],
            diff=unified_diff(vm_config_path(a.vmid), conf.text(), preview),
        )


def _preview(text: str, values: dict[str, str | None]) -> str:
    """The file as PVE writes it once the change is applied (pending changes folded in)."""
    from gpuhost.pve import config as pveconf

    conf = pveconf.parse(text, "qemu")
    for key, value in vm_gpu.effective(conf).items():
        conf.set(key, value)
    for key in conf.pending_deletes():
        conf.delete(key)
    conf.sections = [s for s in conf.sections if s.kind != "pending"]
    for key, wanted in values.items():
        if wanted is None:
            conf.delete(key)
        else:
            conf.set(key, wanted)
    return conf.render()


class VmArgs(Args):
    vmid: int = Field(description="the VM's id")


class VmPendingApplied(Operation[VmArgs]):
    """A running VM with pending changes is restarted so they apply (only with ``--allow-restart``)."""

    kind = "vm_pending_applied"
    Args = VmArgs

    def plan(self, host: HostContext) -> Plan:
        vmid = self.args.vmid
        conf = host.fact(vm_config, vmid)
        if conf is None:
            if host.check:
                raise SkipTask(f"VM {vmid} does not exist")
            return _absent(host, vmid)
        keys = vm_gpu.pending_keys(conf)
        if not keys:
            return nothing(f"VM {vmid}: no pending changes")
        status = host.fact(vm_status, vmid)
        if status != "running":
            return nothing(f"VM {vmid} is {status}: its pending {', '.join(keys)} apply when it starts")
        if host.reboot_pending:
            raise SkipTask(f"VM {vmid} restarts once the host has rebooted (vfio-pci owns the GPUs)")
        call = PveCall("post", f"nodes/{host.fact(node_name)}/qemu/{vmid}/status/reboot")
        return Plan(
            reason=f"restart VM {vmid} so its pending {', '.join(keys)} apply",
            actions=[RestartGuest(Guest.vm(vmid), call)],
        )


class VmRunning(Operation[VmArgs]):
    """The VM runs (started when stopped: a start is not a restart)."""

    kind = "vm_running"
    Args = VmArgs

    def plan(self, host: HostContext) -> Plan:
        vmid = self.args.vmid
        status = host.fact(vm_status, vmid)
        if status == "running":
            return nothing(f"VM {vmid} running")
        if host.reboot_pending:
            raise SkipTask(f"VM {vmid} is {status}: it starts once the host has rebooted (vfio-pci owns the GPUs)")
        if status is None:
            if host.check:
                raise SkipTask(f"VM {vmid} does not exist")
            return _absent(host, vmid)
        start = PveCall("post", f"nodes/{host.fact(node_name)}/qemu/{vmid}/status/start")
        return Plan(reason=f"start VM {vmid} ({status})", actions=[start])


class VmProofArgs(Args):
    vmid: int = Field(description="the VM's id")
    gpus: list[VmGpu] = Field(description="the GPUs passed through, each with its hostpci slot and clique")


class VmCommandLineProof(Operation[VmProofArgs]):
    """``qm showcmd`` proves the vfio-pci devices on PCIe ports, the clique ``-set`` lines and no ``kvm=off``."""

    kind = "vm_cmdline_proof"
    Args = VmProofArgs

    def plan(self, host: HostContext) -> Plan:
        vmid = self.args.vmid
        guest = Guest.vm(vmid)
        if host.restart_pending(guest):
            raise SkipTask(f"VM {vmid} has not restarted: QEMU still runs its old command line")
        conf = host.fact(vm_config, vmid)
        if conf is None:
            if host.check:
                raise SkipTask(f"VM {vmid} does not exist")
            return _absent(host, vmid)
        if host.check and vm_gpu.pending_keys(conf):
            raise SkipTask(f"VM {vmid}: check mode, the configuration is not applied")
        cmd = host.fact(vm_showcmd, vmid)
        refs = tuple(g.ref() for g in self.args.gpus)
        gpus = vm_gpu.gpu_indices(conf.main.options, refs)
        problems = [f.message for f in cmdline_findings(cmd, conf.main.options, refs, f"VM {vmid}") if f.failed]
        if problems:
            if host.check:
                raise SkipTask(f"VM {vmid}: would be checked after the change ({problems[0]})")
            raise OperationFailed(f"VM {vmid}: qm showcmd {vmid} shows " + "; ".join(problems))
        cliques = sorted({c for c in cmd.cliques.values()})
        return nothing(
            f"qm showcmd {vmid}: {cmd.machine}, {len(gpus)} vfio-pci GPUs on PCIe root ports, "
            f"cliques {','.join(cliques) or 'none'}, no kvm=off"
        )


class InVmArgs(InGuestArgs):
    """In a playbook: ``{vmid: 100, operation: copy, params: {...}}``; roles pass the operation object."""

    vmid: int = Field(description="the VM whose guest (over SSH at the inventory's address) runs the operation")


class InVm(InGuestOperation[InVmArgs]):
    """Any operation, planned and applied inside VM ``vmid`` (over SSH at the inventory's guest address)."""

    kind = "in_vm"
    Args = InVmArgs
    inside = "gpuhost does not do in a VM"

    def guest(self) -> Guest:
        return Guest.vm(self.args.vmid)

    def status(self, host: HostContext) -> str | None:
        return host.fact(vm_status, self.args.vmid)

    def waits(self, host: HostContext) -> str | None:
        if host.restart_pending(self.guest()):
            return f"VM {self.args.vmid} has not restarted into its new configuration: {self.inner.describe()} waits"
        return None
