"""The explicit table of operations: playbook key → class. No import side effects, no duplicates."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gpuhost.core.operation import Operation
from gpuhost.operations.apt import Apt
from gpuhost.operations.boot import BootRefresh, KernelCmdline
from gpuhost.operations.command import Command
from gpuhost.operations.files import Copy, Template
from gpuhost.operations.lines import Line
from gpuhost.operations.lxc import InCt, LxcContainer, LxcDevices, LxcRestart, LxcRunning, PushToGuest
from gpuhost.operations.modules import ModuleList
from gpuhost.operations.nvidia import NvidiaDriver
from gpuhost.operations.reboot import Reboot, RebootIfNeeded
from gpuhost.operations.sglang import SecretEnvFile, SglangReady, SglangService, SglangTarget, SglangVerify
from gpuhost.operations.systemd import Systemd
from gpuhost.operations.verify import Verify
from gpuhost.operations.vm import InVm, VmCommandLineProof, VmConfig, VmPendingApplied, VmRunning
from gpuhost.operations.vm_p2p import VmP2P


def build_table(classes: Iterable[type[Operation[Any]]]) -> dict[str, type[Operation[Any]]]:
    table: dict[str, type[Operation[Any]]] = {}
    for cls in classes:
        if cls.kind in table:
            raise RuntimeError(
                f"operation kind '{cls.kind}' is defined twice ({table[cls.kind].__name__}, {cls.__name__})"
            )
        table[cls.kind] = cls
    return table


OPERATIONS = build_table(
    [
        Apt,
        BootRefresh,
        Command,
        Copy,
        InCt,
        InVm,
        KernelCmdline,
        Line,
        LxcContainer,
        LxcDevices,
        LxcRestart,
        LxcRunning,
        ModuleList,
        NvidiaDriver,
        PushToGuest,
        Reboot,
        RebootIfNeeded,
        SecretEnvFile,
        SglangReady,
        SglangService,
        SglangTarget,
        SglangVerify,
        Systemd,
        Template,
        Verify,
        VmCommandLineProof,
        VmConfig,
        VmP2P,
        VmPendingApplied,
        VmRunning,
    ]
)


def get(kind: str) -> type[Operation[Any]] | None:
    return OPERATIONS.get(kind)


def kinds() -> list[str]:
    return sorted(OPERATIONS)
