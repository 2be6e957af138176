"""The gpuhost command that applies each finding's fix, with the operator's flag where the fix reboots the node or
restarts a guest (nothing reboots or restarts without it)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from gpuhost.doctor.rank import node_of


@dataclass(frozen=True)
class Where:
    """What a command is aimed at: the inventory file, the node, and the guest of the finding."""

    inventory: str
    node: str
    ctid: int | None = None
    vmid: int | None = None
    levels: str | None = None  # concurrency levels, for a tune of the admission bound


_HOST = "gpuhost provision host -i {inv} --limit {node} --allow-reboot"
_LXC = "gpuhost provision lxc -i {inv} --limit {node}{ct} --allow-reboot --allow-restart"
_VM = "gpuhost provision vm -i {inv} --limit {node}{vm} --allow-reboot --allow-restart"
_RELAUNCH = "gpuhost launch sglang -i {inv} --limit {node}{ct} --allow-restart"
_P2P = "gpuhost verify p2p -i {inv} --host {node}{ct}"
#: tune's first axis is the admission bound: a budget of 2 measures the running profile against the raised bound
#: (the seeds' 1,024, or the top level when higher) at the load the server met, and serves the faster
_TUNE = "gpuhost tune sglang -i {inv} --limit {node}{ct} --concurrency {levels} --budget 2 --allow-restart"

#: check → command template. Host boot and driver state is what ``provision host`` converges (and reboots for);
#: a container's driver, devices and limits what ``provision lxc`` does; a VM's machine, pcie=1 and cliques
#: ``provision vm``; a server's crash or settings a relaunch of its profile.
COMMANDS: dict[str, str] = {
    "host.cmdline_configured": _HOST,
    "host.cmdline_booted": _HOST,
    "host.iommu_passthrough": _HOST,
    "host.nvidia_module": _HOST,
    "host.nvidia_uvm": _HOST,
    "host.persistenced": _HOST,
    "host.vfio_bound": _HOST,
    "host.nvidia_api_mismatch": _LXC,
    "ct.running": _LXC,
    "ct.devices_configured": _LXC,
    "ct.device_nodes": _LXC,
    "ct.gpus_listed": _LXC,
    "ct.driver_match": _LXC,
    "ct.driver_held": _LXC,
    "ct.uvm": _LXC,
    "ct.memlock": _LXC,
    "ct.cuda_init": _LXC,
    "vm.running": _VM,
    "vm.q35": _VM,
    "vm.functions": _VM,
    "vm.pcie": _VM,
    "vm.cliques": _VM,
    "vm.no_kvm_off": _VM,
    "vm.vfio_bound": _VM,
    "p2p-status": _P2P,
    "serve.unit": _RELAUNCH,
    "serve.health": _RELAUNCH,
    "serve.server-info": _RELAUNCH,
}


def command_for(check: str, where: Where) -> str | None:
    """The command for ``check`` aimed at ``where`` (``None``: no gpuhost command applies that fix; the fix is the
    operator's, e.g. a profile to edit). A server's crash signature is fixed by relaunching its profile once the
    cause is gone (the relaunch is a new start: the journal since it is read afresh)."""
    template = COMMANDS.get(check)
    if template is None and check.startswith("sglang.log."):
        template = _RELAUNCH
    if template is None and check in ("bench.admission-bound", "bench.not-compute-bound", "bench.ttft-explosion"):
        template = _RELAUNCH
    if template is None and check == "serve.admission-queueing" and where.levels:
        template = _TUNE
    if template is None:
        return None
    return template.format(
        inv=shlex.quote(where.inventory),
        node=shlex.quote(where.node),
        ct=f" --ctid {where.ctid}" if where.ctid is not None else "",
        vm=f" --vmid {where.vmid}" if where.vmid is not None else "",
        levels=shlex.quote(where.levels or ""),
    )


def where_of(subject: str, inventory: str) -> Where:
    """``pve1/CT 200`` → node pve1, CT 200; ``pve1/VM 300`` → VM 300; ``pve1`` → the node."""
    node = node_of(subject)
    rest = subject.split("/", 1)[1] if "/" in subject else ""
    words = rest.split()
    ctid = int(words[1]) if len(words) >= 2 and words[0] == "CT" and words[1].isdigit() else None
    vmid = int(words[1]) if len(words) >= 2 and words[0] == "VM" and words[1].isdigit() else None
    return Where(inventory, node, ctid, vmid)
