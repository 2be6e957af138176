"""The explicit table of operations: playbook key → class. No import side effects, no duplicates.

:data:`KINDS` names each operation's module and class; :func:`get` imports only the operation a
playbook names (a run that uses ``line`` and ``template`` does not load the LXC, NVIDIA or verify
machinery). :data:`OPERATIONS`, every class imported, is built on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpuhost.lazy_table import LazyTable

if TYPE_CHECKING:
    from gpuhost.core.operation import Operation

#: kind → (module, class); kept sorted by kind.
KINDS: dict[str, tuple[str, str]] = {
    "apt": ("gpuhost.operations.apt", "Apt"),
    "boot_refresh": ("gpuhost.operations.boot", "BootRefresh"),
    "command": ("gpuhost.operations.command", "Command"),
    "copy": ("gpuhost.operations.files", "Copy"),
    "in_container": ("gpuhost.operations.lxc", "InCt"),
    "in_vm": ("gpuhost.operations.vm", "InVm"),
    "kernel_cmdline": ("gpuhost.operations.boot", "KernelCmdline"),
    "line": ("gpuhost.operations.lines", "Line"),
    "lxc_container": ("gpuhost.operations.lxc", "LxcContainer"),
    "lxc_devices": ("gpuhost.operations.lxc", "LxcDevices"),
    "lxc_restart": ("gpuhost.operations.lxc", "LxcRestart"),
    "lxc_running": ("gpuhost.operations.lxc", "LxcRunning"),
    "module_list": ("gpuhost.operations.modules", "ModuleList"),
    "nvidia_driver": ("gpuhost.operations.nvidia", "NvidiaDriver"),
    "nvidia_installer": ("gpuhost.operations.nvidia", "NvidiaInstaller"),
    "push_to_guest": ("gpuhost.operations.lxc", "PushToGuest"),
    "reboot": ("gpuhost.operations.reboot", "Reboot"),
    "reboot_if_needed": ("gpuhost.operations.reboot", "RebootIfNeeded"),
    "sglang_env_file": ("gpuhost.operations.sglang", "SecretEnvFile"),
    "sglang_model": ("gpuhost.operations.sglang", "SglangModel"),
    "sglang_ready": ("gpuhost.operations.sglang", "SglangReady"),
    "sglang_rendezvous": ("gpuhost.operations.sglang_multinode", "SglangRendezvous"),
    "sglang_service": ("gpuhost.operations.sglang", "SglangService"),
    "sglang_target": ("gpuhost.operations.sglang", "SglangTarget"),
    "sglang_verify": ("gpuhost.operations.sglang", "SglangVerify"),
    "smg_ready": ("gpuhost.operations.gateway", "GatewayReady"),
    "smg_service": ("gpuhost.operations.gateway", "GatewayService"),
    "smg_workers": ("gpuhost.operations.gateway", "GatewayWorkers"),
    "systemd": ("gpuhost.operations.systemd", "Systemd"),
    "template": ("gpuhost.operations.files", "Template"),
    "verify": ("gpuhost.operations.verify", "Verify"),
    "vm_cmdline_proof": ("gpuhost.operations.vm", "VmCommandLineProof"),
    "vm_gpu_config": ("gpuhost.operations.vm", "VmConfig"),
    "vm_p2p": ("gpuhost.operations.vm_p2p", "VmP2P"),
    "vm_pending_applied": ("gpuhost.operations.vm", "VmPendingApplied"),
    "vm_running": ("gpuhost.operations.vm", "VmRunning"),
}
_TABLE: LazyTable[type[Operation[Any]]] = LazyTable("operation", KINDS, lambda cls: cls.kind)


def get(name: str) -> type[Operation[Any]] | None:
    return _TABLE.get(name)


def kinds() -> list[str]:
    return _TABLE.names()


def __getattr__(name: str) -> Any:
    if name == "OPERATIONS":  # every operation, imported (the reference generator, tests)
        table = _TABLE.all()
        globals()["OPERATIONS"] = table
        return table
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
