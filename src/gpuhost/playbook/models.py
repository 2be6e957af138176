"""Plays and playbooks as loaded (before any host is known)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuhost.playbook.variables import Layer, Origin


@dataclass(frozen=True)
class TaskSpec:
    """A task as written: its operation's kind and raw arguments, and where it stands in the file."""

    name: str
    kind: str
    args: dict[str, Any]
    origin: Origin
    tags: tuple[str, ...] = ()
    notify: tuple[str, ...] = ()

    @property
    def is_flush(self) -> bool:
        return self.kind == "meta"

    @property
    def templated(self) -> bool:
        """Whether an argument holds a template (then it is validated per host, once variables are known)."""
        return _templated(self.args)


def _templated(value: Any) -> bool:
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, dict):
        return any(_templated(v) for v in value.values())
    if isinstance(value, list):
        return any(_templated(v) for v in value)
    return False


@dataclass(frozen=True)
class RoleRef:
    name: str
    vars: Layer = field(default_factory=lambda: Layer({}, {}))
    origin: Origin | None = None


@dataclass(frozen=True)
class Play:
    name: str
    hosts: str
    origin: Origin
    vars: Layer = field(default_factory=lambda: Layer({}, {}))
    roles: tuple[RoleRef, ...] = ()
    tasks: tuple[TaskSpec, ...] = ()
    handlers: tuple[TaskSpec, ...] = ()
    #: hosts worked on at a time, batch after batch (a rolling change); None: all at once (up to forks)
    serial: int | None = None


@dataclass(frozen=True)
class Playbook:
    path: Path
    plays: tuple[Play, ...]

    @property
    def directory(self) -> Path:
        return self.path.resolve().parent
