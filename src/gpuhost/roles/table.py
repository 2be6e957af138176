"""The explicit table of roles: name → class. No import side effects, no duplicates.

:data:`NAMES` names each role's module and class; :func:`get_role` imports only the role a
playbook names (a playbook of plain tasks loads no role). :data:`ROLES`, every class imported, is
built on first use.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

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
_loaded: dict[str, type[Role[Any]]] = {}


def build_table(classes: Iterable[type[Role[Any]]]) -> dict[str, type[Role[Any]]]:
    table: dict[str, type[Role[Any]]] = {}
    for cls in classes:
        if cls.name in table:
            raise RuntimeError(f"role '{cls.name}' is defined twice ({table[cls.name].__name__}, {cls.__name__})")
        table[cls.name] = cls
    return table


def get_role(name: str) -> type[Role[Any]] | None:
    cls = _loaded.get(name)
    if cls is None and name in NAMES:
        module, attr = NAMES[name]
        cls = getattr(importlib.import_module(module), attr)
        if cls.name != name:
            raise RuntimeError(f"{module}.{attr} is role '{cls.name}', but the table lists it as '{name}'")
        _loaded[name] = cls
    return cls


def role_names() -> list[str]:
    return sorted(NAMES)


def __getattr__(name: str) -> Any:
    if name == "ROLES":  # every role, imported (the reference generator, tests)
        table = build_table(c for c in (get_role(n) for n in NAMES) if c is not None)
        globals()["ROLES"] = table
        return table
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
