"""Plays and playbooks as the runner sees them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuhost.playbook.task import Task


@dataclass(frozen=True)
class RoleRef:
    name: str
    vars: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Play:
    name: str
    hosts: str
    vars: dict[str, Any] = field(default_factory=dict)
    roles: tuple[RoleRef, ...] = ()
    tasks: tuple[Task, ...] = ()
    handlers: tuple[Task, ...] = ()


@dataclass(frozen=True)
class Playbook:
    path: Path
    plays: tuple[Play, ...]

    @property
    def directory(self) -> Path:
        return self.path.resolve().parent
