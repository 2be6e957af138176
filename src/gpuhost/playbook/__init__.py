"""Playbooks: plays that select hosts and run roles and tasks in order.

The names below load on first use (PEP 562), so importing this package does not pull in pydantic.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuhost.playbook.loader import load_playbook
    from gpuhost.playbook.models import Play, Playbook, RoleRef
    from gpuhost.playbook.task import Task, role_task

_LAZY = {"load_playbook": "gpuhost.playbook.loader", "Play": "gpuhost.playbook.models",
         "Playbook": "gpuhost.playbook.models", "RoleRef": "gpuhost.playbook.models",
         "Task": "gpuhost.playbook.task", "role_task": "gpuhost.playbook.task"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = ["Play", "Playbook", "RoleRef", "Task", "load_playbook", "role_task"]
