"""``--start-at-task NAME``: checked against the playbook before any host is contacted."""

from __future__ import annotations

from gpuhost.errors import UsageError
from gpuhost.playbook.models import Playbook


def check_start_at_task(playbook: Playbook, name: str) -> None:
    """A ``--start-at-task`` no play task has is refused, unless a role (whose tasks depend on facts) may have it."""
    if any(play.roles for play in playbook.plays):
        return
    names = [t.name for play in playbook.plays for t in play.tasks if not t.is_flush]
    if name not in names:
        shown = ", ".join(f"'{n}'" for n in names) or "none"
        raise UsageError(f"--start-at-task '{name}': {playbook.path} has no task of that name (tasks: {shown})")
