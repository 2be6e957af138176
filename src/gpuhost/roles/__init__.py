"""Roles: ordered operations with defaults, chosen in Python so they may read facts first."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from gpuhost.playbook.task import Task
    from gpuhost.runner.context import HostContext

_ROLES: dict[str, type[Role]] = {}


class Role(ABC):
    name: ClassVar[str]
    #: variables the role works with unless inventory, play or command line set them
    defaults: ClassVar[dict[str, Any]] = {}

    @abstractmethod
    def tasks(self, host: HostContext) -> list[Task]:
        """The role's tasks for this host (may read facts to choose)."""

    def handlers(self) -> list[Task]:
        """Handlers known without a host (the playbook loader checks ``notify`` names against them)."""
        return []

    def handlers_for(self, host: HostContext) -> list[Task]:
        """The handlers for this host (roles whose handlers depend on the inventory override this)."""
        return self.handlers()


def register_role(cls: type[Role]) -> type[Role]:
    _ROLES[cls.name] = cls
    return cls


def get_role(name: str) -> type[Role] | None:
    _load_builtin()
    return _ROLES.get(name)


def role_names() -> list[str]:
    _load_builtin()
    return sorted(_ROLES)


def _load_builtin() -> None:
    # Built-in roles register themselves on import.
    from gpuhost.roles import lxc_gpu, proxmox_host  # noqa: F401
