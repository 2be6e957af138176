"""Role ``lxc_gpu``: GPU containers on a node — created, GPUs passed through, the host's exact
driver inside (userspace only, held), and the container checks that CUDA can start."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pydantic import Field, model_validator

from gpuhost.checks.container import APT_HOLD_FILE, ContainerExpectation
from gpuhost.core.task import FLUSH_HANDLERS, Task, task
from gpuhost.errors import OperationFailed
from gpuhost.facts.host import HostFacts, host_facts
from gpuhost.inventory.models import ContainerSpec, DeviceGid, StorageId
from gpuhost.operations.nvidia import DriverPin
from gpuhost.roles.base import Role, RoleVars

if TYPE_CHECKING:
    from gpuhost.core.context import HostContext

APT_HOLD_TEMPLATE = "gpuhost-nvidia.pref.j2"


class LxcGpuVars(RoleVars):
    containers: dict[int, ContainerSpec] = Field(
        {}, description="the node's containers (the inventory's nodes.NAME.containers)"
    )
    lxc_ctids: list[int] | None = Field(None, description="only these containers of the node (--ctid)")
    nvidia_driver: DriverPin | None = Field(
        None, description="the host's driver pin; containers get exactly this version, userspace only"
    )
    lxc_device_gid: DeviceGid = Field(
        44, description="group of the GPU device nodes inside the container (44 is video in Debian)"
    )
    lxc_storage: StorageId = Field("local", description="storage holding container templates")

    @model_validator(mode="after")
    def _consistent(self) -> LxcGpuVars:
        unknown = sorted(set(self.lxc_ctids or ()) - set(self.containers))
        if unknown:
            raise ValueError(
                f"lxc_ctids: CT {unknown[0]} is not among the node's containers "
                f"({', '.join(map(str, self.containers)) or 'none'})"
            )
        if self.selected() and self.nvidia_driver is None:
            raise ValueError(
                "nvidia_driver: set nvidia_driver {version, url, sha256}: the containers get exactly the host's "
                "driver version"
            )
        return self

    def selected(self) -> dict[int, ContainerSpec]:
        if not self.lxc_ctids:
            return dict(self.containers)
        return {k: v for k, v in self.containers.items() if k in self.lxc_ctids}


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


def container_expectation(devices: list[str], driver: str | None) -> ContainerExpectation:
    """What a container given ``devices`` must show inside, with the host module ``driver`` (the one expectation
    the ``verify`` task and ``gpuhost verify lxc`` prove): one GPU listed per ``/dev/nvidiaN`` it gets."""
    gpus = sum(1 for d in devices if re.fullmatch(r"/dev/nvidia\d+", d))
    return ContainerExpectation(gpus=gpus, driver=driver)


def container_tasks(ctid: int, spec: ContainerSpec, v: LxcGpuVars, pin: DriverPin, facts: HostFacts) -> list[Task]:
    # the operations are imported where the tasks are built: ``gpuhost verify lxc`` needs this module's
    # expectations only, not the operations (jinja2 among them)
    from gpuhost.operations.files import Template, TemplateArgs
    from gpuhost.operations.lxc import (
        ContainerArgs,
        DevicesArgs,
        InContainerArgs,
        InCt,
        LxcContainer,
        LxcDevices,
        LxcRunning,
        PushArgs,
        PushToGuest,
        RunningArgs,
    )
    from gpuhost.operations.nvidia import NvidiaDriver, NvidiaDriverArgs, installer_path
    from gpuhost.operations.verify import ContainerProofs, Verify, VerifyArgs

    devices = gpu_devices(spec, facts)
    expect = container_expectation(devices, pin.version)
    gpus = expect.gpus
    ct = f"CT {ctid}"
    installer = installer_path(pin.version)
    inside_driver = NvidiaDriver(NvidiaDriverArgs(**pin.model_dump(), target="container"))
    hold = Template(TemplateArgs(src=APT_HOLD_TEMPLATE, dest=APT_HOLD_FILE, mode="0644"))
    return [
        task(
            f"{ct} exists",
            LxcContainer(
                ContainerArgs(
                    ctid=ctid,
                    hostname=spec.hostname or f"gpu{ctid}",
                    template=spec.template or "auto",
                    storage=v.lxc_storage,
                    **spec.resources(),
                )
            ),
        ),
        task(
            f"{ct}: {gpus} GPUs passed through",
            LxcDevices(DevicesArgs(ctid=ctid, devices=devices, gid=v.lxc_device_gid)),
            notify=(restart_handler(ctid),),
        ),
        FLUSH_HANDLERS,
        task(f"{ct} running", LxcRunning(RunningArgs(ctid=ctid))),
        task(
            f"{ct}: NVIDIA installer pushed",
            PushToGuest(PushArgs(ctid=ctid, src=installer, dest=installer, sha256=pin.sha256, mode="0644")),
            tags=("driver",),
        ),
        task(
            f"{ct}: NVIDIA {pin.version} userspace (no kernel modules)",
            InCt(InContainerArgs(ctid=ctid, operation=inside_driver)),
            tags=("driver",),
        ),
        task(
            f"{ct}: distribution NVIDIA packages held back",
            InCt(InContainerArgs(ctid=ctid, operation=hold)),
            tags=("driver",),
        ),
        task(
            f"{ct}: verified ({gpus} GPUs, driver {pin.version}, uvm, memlock, cuInit)",
            Verify(VerifyArgs(lxc=ContainerProofs(ctid=ctid, **expect.model_dump()))),
            tags=("verify",),
        ),
    ]


class LxcGpu(Role[LxcGpuVars]):
    """GPU containers on a node: each container created, its GPUs passed through as ``devN`` entries, the
    host's exact NVIDIA driver installed inside (userspace only, held), then verified from inside."""

    name = "lxc_gpu"
    Vars = LxcGpuVars
    templates = (APT_HOLD_TEMPLATE,)

    def tasks(self, host: HostContext, v: LxcGpuVars) -> list[Task]:
        from gpuhost.operations.nvidia import NvidiaInstaller

        containers = v.selected()
        if not containers:
            return []
        pin = v.nvidia_driver
        assert pin is not None  # the Vars model requires it when containers are selected
        facts = host.fact(host_facts)
        loaded = facts.nvidia.version if facts.nvidia else None
        if loaded and loaded != pin.version and not host.check:
            raise OperationFailed(
                f"the host runs NVIDIA module {loaded} but the pin is {pin.version}: reboot the "
                "host (gpuhost provision host --allow-reboot) so the containers can match it"
            )
        tasks: list[Task] = [
            task(
                f"NVIDIA {pin.version} installer cached on the node",
                NvidiaInstaller(pin),
                tags=("driver",),
            )
        ]
        for ctid, spec in containers.items():
            tasks += container_tasks(ctid, spec, v, pin, facts)
        return tasks

    def handlers(self, v: LxcGpuVars) -> list[Task]:
        from gpuhost.operations.lxc import LxcRestart, RunningArgs

        return [task(restart_handler(ctid), LxcRestart(RunningArgs(ctid=ctid))) for ctid in v.selected()]
