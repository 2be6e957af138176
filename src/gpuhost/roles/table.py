"""The explicit table of roles: name → class. No import side effects, no duplicates."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gpuhost.roles.base import Role
from gpuhost.roles.gateway import SmgGateway
from gpuhost.roles.lxc_gpu import LxcGpu
from gpuhost.roles.proxmox_host import ProxmoxHost
from gpuhost.roles.sglang import Sglang
from gpuhost.roles.vm_gpu import VmGpuRole


def build_table(classes: Iterable[type[Role[Any]]]) -> dict[str, type[Role[Any]]]:
    table: dict[str, type[Role[Any]]] = {}
    for cls in classes:
        if cls.name in table:
            raise RuntimeError(f"role '{cls.name}' is defined twice ({table[cls.name].__name__}, {cls.__name__})")
        table[cls.name] = cls
    return table


ROLES = build_table([LxcGpu, ProxmoxHost, Sglang, SmgGateway, VmGpuRole])


def get_role(name: str) -> type[Role[Any]] | None:
    return ROLES.get(name)


def role_names() -> list[str]:
    return sorted(ROLES)
