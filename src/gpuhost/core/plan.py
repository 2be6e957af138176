"""An operation's decision: why, which actions (none when the host is already right), and the diff."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from gpuhost.core.actions import Action, InGuest, WaitUntil, WriteFile
from gpuhost.core.guest import Guest


@dataclass
class Plan:
    """What an operation decided. No actions means the host is already as asked."""

    reason: str
    actions: list[Action] = field(default_factory=list)
    diff: str = ""
    #: guests whose configuration is already as wanted but staged (pending): it applies at their next
    #: (re)start, so the runner records that they must restart
    waiting: tuple[Guest, ...] = ()

    @property
    def changes(self) -> bool:
        """Whether the plan changes the host (a wait alone changes nothing)."""
        return any(not isinstance(a.action if isinstance(a, InGuest) else a, WaitUntil) for a in self.actions)

    @property
    def waits(self) -> list[WaitUntil[Any]]:
        """What the plan waits for, in order (inside a guest too)."""
        inner = [a.action if isinstance(a, InGuest) else a for a in self.actions]
        return [a for a in inner if isinstance(a, WaitUntil)]


def nothing(reason: str) -> Plan:
    return Plan(reason=reason)


def unified_diff(path: str, before: str | None, after: str) -> str:
    """A unified diff of a file's text, ``/dev/null`` standing for a missing file."""
    lines = difflib.unified_diff(
        (before or "").splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile="/dev/null" if before is None else f"{path} (before)",
        tofile=f"{path} (after)",
    )
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


SECRET_DIFF = "content changed (secret)\n"


def file_plan(
    path: str,
    before: str | None,
    after: str,
    mode: int | None = None,
    reason_same: str | None = None,
    *,
    secret: bool = False,
) -> Plan:
    """The plan that makes ``path`` hold ``after``. A secret file never shows its text in the diff."""
    if before == after:
        return nothing(reason_same or f"{path} already as wanted")
    what = "create" if before is None else "update"
    diff = f"{path}: {SECRET_DIFF}" if secret else unified_diff(path, before, after)
    return Plan(reason=f"{what} {path}", actions=[WriteFile(path, after, mode, secret=secret)], diff=diff)
