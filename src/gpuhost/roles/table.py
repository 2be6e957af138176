"""The explicit table of roles: name → class. No import side effects, no duplicates.

:data:`NAMES` names each role's module and class; :func:`get_role` imports only the role a
playbook names (a playbook of plain tasks loads no role). :data:`ROLES`, every class imported, is
built on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpuhost.lazy_table import LazyTable

if TYPE_CHECKING:
    from gpuhost.roles.base import Role

#: role name → (module, class); kept sorted by name.
NAMES: dict[str, tuple[str, str]] = {
    "lxc_gpu": ("gpuhost.roles.lxc_gpu", "LxcGpu"),
    "proxmox_host": ("gpuhost.roles.proxmox_host", "ProxmoxHost"),
    "sglang": ("gpuhost.roles.sglang", "Sglang"),
    "smg_gateway": ("gpuhost.roles.gateway", "SmgGateway"),
    "vm_gpu": ("gpuhost.roles.vm_gpu", "VmGpuRole"),
}
_TABLE: LazyTable[type[Role[Any]]] = LazyTable("role", NAMES, lambda cls: cls.name)


def get_role(name: str) -> type[Role[Any]] | None:
    return _TABLE.get(name)


def role_names() -> list[str]:
    return _TABLE.names()


def __getattr__(name: str) -> Any:
    if name == "ROLES":  # every role, imported (the reference generator, tests)
        table = _TABLE.all()
        globals()["ROLES"] = table
        return table
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
