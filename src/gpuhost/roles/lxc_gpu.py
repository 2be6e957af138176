"""Role ``lxc_gpu``: GPU containers on a node — created, GPUs passed through, the host's exact
driver inside (userspace only, held), and named checks that CUDA can start.

Variables: ``lxc_ctids`` (only these containers of the node's ``containers:``), ``nvidia_driver``
(the same pin as the host role), ``lxc_device_gid`` (44, ``video``), ``lxc_storage`` (templates).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from gpuhost.errors import OperationFailed
from gpuhost.facts.host import HostFacts, host_facts
from gpuhost.inventory.models import ContainerSpec
from gpuhost.operations.command import Command
from gpuhost.operations.lxc import InCt, LxcContainer, LxcDevices, LxcRestart, LxcRunning
from gpuhost.operations.lxc_checks import LxcCheck
from gpuhost.operations.nvidia import NvidiaDriverArgs, download_command, installer_path
from gpuhost.playbook.task import FLUSH_HANDLERS, Task, role_task
from gpuhost.roles import Role, register_role

if TYPE_CHECKING:
    from gpuhost.runner.context import HostContext

#: Keeps Debian's own NVIDIA packages from ever replacing the .run userspace (the "hold").
APT_HOLD = ("# Managed by gpuhost: the NVIDIA userspace comes from NVIDIA's .run installer at the host's\n"
            "# exact module version; distribution packages must never replace it.\n"
            "Package: nvidia-* libnvidia-* libcuda* libnvcuvid* firmware-nvidia-*\n"
            "Pin: release *\n"
            "Pin-Priority: -1\n")
APT_HOLD_FILE = "/etc/apt/preferences.d/gpuhost-nvidia.pref"


def restart_handler(ctid: int) -> str:
    return f"restart CT {ctid}"


def gpu_devices(spec: ContainerSpec, facts: HostFacts) -> list[str]:
    """Host device nodes the container gets: its GPUs, the control and UVM nodes, and any caps."""
    present = set(facts.nvidia_devices)
    indices = sorted(int(m.group(1)) for d in present if (m := re.fullmatch(r"/dev/nvidia(\d+)", d)))
    if not indices:
        indices = list(range(len(facts.gpus)))
    if spec.gpus != "all":
        unknown = [i for i in spec.gpus if i not in indices]
        if unknown:
            raise OperationFailed(f"GPU index {unknown[0]} does not exist on this node (has {indices})")
        indices = list(spec.gpus)
    devices = [f"/dev/nvidia{i}" for i in indices]
    devices += ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
    devices += sorted(d for d in present if d.startswith("/dev/nvidia-caps/"))
    return devices


@register_role
class LxcGpu(Role):
    name = "lxc_gpu"
    defaults = {"lxc_ctids": None, "lxc_device_gid": 44, "lxc_storage": "local", "nvidia_driver": None}

    def _containers(self, host: HostContext) -> dict[int, ContainerSpec]:
        chosen = host.vars.get("lxc_ctids")
        containers = dict(host.node.containers)
        if chosen:
            wanted = {int(c) for c in (chosen if isinstance(chosen, list) else [chosen])}
            unknown = sorted(wanted - set(containers))
            if unknown:
                raise OperationFailed(f"CT {unknown[0]} is not in the inventory's containers of {host.name}")
            containers = {k: v for k, v in containers.items() if k in wanted}
        return containers

    def tasks(self, host: HostContext) -> list[Task]:
        containers = self._containers(host)
        if not containers:
            return []
        pin_raw = host.vars.get("nvidia_driver")
        if not isinstance(pin_raw, dict):
            raise OperationFailed("set nvidia_driver {version, url, sha256} in the inventory: the containers get "
                                  "exactly the host's driver version")
        pin = NvidiaDriverArgs.model_validate({**pin_raw, "target": "container"})
        facts = host.fact(host_facts)
        loaded = facts.nvidia.version if facts.nvidia else None
        if loaded and loaded != pin.version and not host.check:
            raise OperationFailed(f"the host runs NVIDIA module {loaded} but the pin is {pin.version}: reboot the "
                                  "host (gpuhost provision host --allow-reboot) so the containers can match it")
        tasks: list[Task] = [role_task(f"NVIDIA {pin.version} installer cached on the node",
                                       Command.from_dict({"cmd": download_command(pin),
                                                          "unless": f"test -f {installer_path(pin.version)}"}),
                                       tags=("driver",))]
        for ctid, spec in containers.items():
            devices = gpu_devices(spec, facts)
            gpus = sum(1 for d in devices if re.fullmatch(r"/dev/nvidia\d+", d))
            ct = f"CT {ctid}"
            tasks += [
                role_task(f"{ct} exists", LxcContainer.from_dict({
                    "ctid": ctid, "hostname": spec.hostname or f"gpu{ctid}", "template": spec.template or "auto",
                    "storage": host.vars.get("lxc_storage", "local"), "cores": spec.cores, "memory": spec.memory,
                    "swap": spec.swap, "rootfs": spec.rootfs, "net0": spec.net0, "unprivileged": spec.unprivileged,
                    "features": spec.features, "onboot": spec.onboot})),
                role_task(f"{ct}: {gpus} GPUs passed through", LxcDevices.from_dict({
                    "ctid": ctid, "devices": devices, "gid": int(host.vars.get("lxc_device_gid", 44))}),
                    notify=(restart_handler(ctid),)),
                FLUSH_HANDLERS,
                role_task(f"{ct} running", LxcRunning.from_dict({"ctid": ctid})),
                role_task(f"{ct}: NVIDIA installer pushed", Command.from_dict({
                    "cmd": (f"pct exec {ctid} -- mkdir -p /var/cache/gpuhost && pct push {ctid} "
                            f"{installer_path(pin.version)} {installer_path(pin.version)}"),
                    "unless": f"pct exec {ctid} -- test -f {installer_path(pin.version)}"}), tags=("driver",)),
                role_task(f"{ct}: NVIDIA {pin.version} userspace (no kernel modules)", InCt.from_dict({
                    "ctid": ctid, "operation": "nvidia_driver", "params": pin.model_dump()}), tags=("driver",)),
                role_task(f"{ct}: distribution NVIDIA packages held back", InCt.from_dict({
                    "ctid": ctid, "operation": "copy",
                    "params": {"dest": APT_HOLD_FILE, "content": APT_HOLD, "mode": "0644"}}), tags=("driver",)),
            ]
            for check, title in (("nvidia_smi", f"nvidia-smi -L lists {gpus} GPUs"),
                                 ("driver_match", f"driver {pin.version} = host module"),
                                 ("uvm", "/dev/nvidia-uvm present"),
                                 ("memlock", "ulimit -l unlimited"),
                                 ("cuda_init", "cuInit succeeds")):
                tasks.append(role_task(f"{ct} check: {title}", LxcCheck.from_dict({
                    "ctid": ctid, "check": check, "gpus": gpus, "driver": pin.version}), tags=("verify",)))
        return tasks

    def handlers_for(self, host: HostContext) -> list[Task]:
        return [role_task(restart_handler(ctid), LxcRestart.from_dict({"ctid": ctid}))
                for ctid in self._containers(host)]
