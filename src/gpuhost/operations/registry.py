"""Playbook keys → operation classes."""

from __future__ import annotations

from gpuhost.operations.base import Operation

_REGISTRY: dict[str, type[Operation]] = {}


def register(cls: type[Operation]) -> type[Operation]:
    if cls.kind in _REGISTRY:
        raise RuntimeError(f"operation kind '{cls.kind}' registered twice")
    _REGISTRY[cls.kind] = cls
    return cls


def get(kind: str) -> type[Operation] | None:
    _load_builtin()
    return _REGISTRY.get(kind)


def kinds() -> list[str]:
    _load_builtin()
    return sorted(_REGISTRY)


def _load_builtin() -> None:
    from gpuhost.operations import apt, boot, command, files, host_checks, lines, lxc, lxc_checks, modules, nvidia, reboot, systemd  # noqa: F401,E501
