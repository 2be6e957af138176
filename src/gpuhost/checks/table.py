"""The registries of host and container checks: which checks prove a provisioned host (or GPU container), in which
order, and when each applies.

One entry per check of :mod:`gpuhost.checks.host`. Everything that proves a host goes through this table:
the ``verify`` task at the end of ``provision host`` (:func:`host_findings`), ``gpuhost verify host`` and the
acceptance suite (``acceptance/suite/test_host.py`` is parametrised over :data:`HOST_CHECKS`), and the
troubleshooting page (``scripts/gen_reference.py`` prints each entry's ``wanted``). A ``host`` check that is
registered with ``@check`` but missing here fails ``tests/unit/checks/test_table.py``.

Adding a host check: write the function in ``checks/host.py`` (``@check``, signature ``(facts, subject,
expect)``), then add its entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpuhost.checks import container, host
from gpuhost.checks.container import ContainerExpectation
from gpuhost.checks.finding import Finding, check_name
from gpuhost.checks.host import HostExpectation
from gpuhost.facts.container import ContainerFacts
from gpuhost.facts.host import HostFacts

#: A check gives one finding, ``None`` (nothing to judge), or one finding per device (e.g. each GPU the driver
#: failed to initialise; an empty list: nothing to judge).
HostCheckFn = Callable[[HostFacts, str, HostExpectation], Finding | list[Finding] | None]


@dataclass(frozen=True)
class HostCheck:
    """A host check and when it applies. ``run`` returns ``None`` when the host gives it nothing to judge
    (``not_applicable`` says why, e.g. no GPU); ``applies`` says whether the expectation asks for it at all."""

    run: HostCheckFn
    applies: Callable[[HostExpectation], bool]
    wanted: str  # what the check proves, in words ("vfio-pci binding"): the docs and a skipped test say it
    not_applicable: str = ""

    @property
    def name(self) -> str:
        return check_name(self.run)


def _always(expect: object) -> bool:
    return True


HOST_CHECKS: tuple[HostCheck, ...] = (
    HostCheck(host.cmdline_booted, lambda e: bool(e.cmdline), "the IOMMU tokens on /proc/cmdline"),
    HostCheck(host.cmdline_configured, lambda e: bool(e.cmdline), "the IOMMU tokens in the boot entry"),
    HostCheck(
        host.iommu_passthrough,
        lambda e: e.iommu_passthrough and "iommu=pt" in e.cmdline,
        "the IOMMU Passthrough default domain (iommu=pt)",
        not_applicable="the kernel log names no IOMMU domain, or the host did not boot with iommu=pt",
    ),
    HostCheck(host.iommu_groups, _always, "GPUs in IOMMU groups", not_applicable="the node has no NVIDIA GPUs"),
    HostCheck(host.nvidia_module, lambda e: e.nvidia_driver is not None, "an NVIDIA kernel module on the host"),
    HostCheck(host.nvidia_uvm, lambda e: e.nvidia_uvm, "/dev/nvidia-uvm on the host"),
    HostCheck(host.persistenced, lambda e: e.persistenced, "nvidia-persistenced"),
    HostCheck(host.vfio_bound, lambda e: e.vfio, "vfio-pci binding", not_applicable="the node has no NVIDIA GPUs"),
    HostCheck(
        host.iommu_faults, _always, "no GPU DMA blocked by the IOMMU", not_applicable="the kernel logged no IOMMU fault"
    ),
    HostCheck(
        host.nvidia_api_mismatch,
        _always,
        "one NVIDIA version in userspace and kernel",
        not_applicable="the kernel logged no NVRM API mismatch",
    ),
    HostCheck(
        host.gpu_init, _always, "every GPU initialised", not_applicable="the kernel logged no RmInitAdapter failure"
    ),
)


def host_checks(expect: HostExpectation) -> list[HostCheck]:
    """The checks ``expect`` asks for, in the order they are reported."""
    return [c for c in HOST_CHECKS if c.applies(expect)]


def host_findings(facts: HostFacts, subject: str, expect: HostExpectation) -> list[Finding]:
    """Every host proof that ``expect`` asks for (checks that find nothing to judge left out)."""
    out: list[Finding] = []
    for c in host_checks(expect):
        found = c.run(facts, subject, expect)
        if isinstance(found, list):
            out.extend(found)
        elif found is not None:
            out.append(found)
    return out


ContainerCheckFn = Callable[[ContainerFacts, str, ContainerExpectation], Finding | None]


@dataclass(frozen=True)
class ContainerCheck:
    """A check over a container's own facts (``nvidia-smi``, the userspace, ``ulimit -l``, cuInit inside)."""

    run: ContainerCheckFn
    applies: Callable[[ContainerExpectation], bool]
    wanted: str

    @property
    def name(self) -> str:
        return check_name(self.run)


#: Run by the ``verify`` task at the end of ``provision lxc`` (:func:`container_findings`) and by the acceptance
#: suite (``test_lxc.py``'s ``test_container``, parametrised over it).
CONTAINER_CHECKS: tuple[ContainerCheck, ...] = (
    ContainerCheck(container.gpus_listed, _always, "its GPUs listed by nvidia-smi -L"),
    ContainerCheck(container.driver_match, lambda e: e.driver is not None, "the host module's version as userspace"),
    ContainerCheck(container.uvm, _always, "/dev/nvidia-uvm inside"),
    ContainerCheck(container.memlock, _always, "ulimit -l unlimited"),
    ContainerCheck(container.cuda_init, _always, "cuInit succeeding"),
)
#: Container checks that judge what only the acceptance suite reads beside the container's facts (its status, its
#: PVE config, the device nodes inside, the APT hold file): ``test_lxc.py`` runs each as ``test_<name>``.
CONTAINER_SUITE_ONLY: tuple[str, ...] = ("ct.running", "ct.devices_configured", "ct.device_nodes", "ct.driver_held")


def container_findings(f: ContainerFacts, subject: str, expect: ContainerExpectation) -> list[Finding]:
    """Every check over the container's own facts that ``expect`` asks for."""
    out = [c.run(f, subject, expect) for c in CONTAINER_CHECKS if c.applies(expect)]
    return [x for x in out if x is not None]
