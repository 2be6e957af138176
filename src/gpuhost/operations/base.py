"""Operations: idempotent building blocks that read facts and decide what must change.

An operation is declared in a playbook as ``{kind: {args...}}``. Its :meth:`Operation.plan`
reads facts through the :class:`~gpuhost.runner.context.HostContext` and returns a
:class:`Plan`: the actions needed (none when the host is already right) and why.
"""

from __future__ import annotations

import difflib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from gpuhost.operations.actions import Action, WriteFile

if TYPE_CHECKING:
    from gpuhost.runner.context import HostContext


class Args(BaseModel):
    """Base of every operation's arguments: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass
class Plan:
    """What an operation decided. No actions means the host is already as asked."""

    reason: str
    actions: list[Action] = field(default_factory=list)
    diff: str = ""

    @property
    def changes(self) -> bool:
        return bool(self.actions)


class SkipTask(Exception):
    """Raised by :meth:`Operation.plan` when the task does not apply now (the reason says why)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def nothing(reason: str) -> Plan:
    return Plan(reason=reason)


class Operation(ABC):
    """Subclasses set ``kind`` (the playbook key) and ``Args`` (their argument model)."""

    kind: ClassVar[str]
    Args: ClassVar[type[Args]]

    def __init__(self, args: Args) -> None:
        self.args = args

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Operation:
        return cls(cls.Args.model_validate(raw))

    @abstractmethod
    def plan(self, host: HostContext) -> Plan:
        """Read facts, decide; must not change the host."""

    def describe(self) -> str:
        return self.kind


def unified_diff(path: str, before: str | None, after: str) -> str:
    """A unified diff of a file's text, ``/dev/null`` standing for a missing file."""
    lines = difflib.unified_diff(
        (before or "").splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile="/dev/null" if before is None else f"{path} (before)", tofile=f"{path} (after)")
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def file_plan(path: str, before: str | None, after: str, mode: int | None = None,
              reason_same: str | None = None) -> Plan:
    """The plan that makes ``path`` hold ``after``."""
    if before == after:
        return nothing(reason_same or f"{path} already as wanted")
    what = "create" if before is None else "update"
    return Plan(reason=f"{what} {path}", actions=[WriteFile(path, after, mode)],
                diff=unified_diff(path, before, after))
