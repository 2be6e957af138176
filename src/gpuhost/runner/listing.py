"""What a run would do, without doing it: ``--list-hosts``, ``--list-tasks``, ``--list-tags``.

Hosts come from the inventory alone. A play's own tasks are known from the playbook; a role's
tasks are chosen from each host's facts, so listing them connects and reads facts (read-only
commands; nothing on the host changes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuhost.core.task import Task
from gpuhost.errors import GpuhostError
from gpuhost.inventory.loader import Inventory
from gpuhost.playbook.models import Playbook


@dataclass
class PlayHosts:
    play: str
    pattern: str
    hosts: list[str]


@dataclass
class HostTasks:
    play: str
    host: str
    tasks: list[Task] = field(default_factory=list)
    handlers: list[Task] = field(default_factory=list)
    error: str | None = None


def play_hosts(playbook: Playbook, inventory: Inventory, limit: str | None) -> list[PlayHosts]:
    from gpuhost.runner.prepare import play_host_names

    allowed = set(inventory.select(limit)) if limit is not None else None
    out = []
    for play in playbook.plays:
        out.append(PlayHosts(play.name, play.hosts, play_host_names(play, inventory, allowed)))
    return out


def host_tasks(playbook: Playbook, inventory: Inventory, opts: object) -> list[HostTasks]:
    """Every play's tasks and handlers per host, role tasks read from facts (check mode: nothing changes)."""
    from gpuhost.runner.context import RunnerHost
    from gpuhost.runner.run import RunOptions, _expand
    from gpuhost.templating import Templates

    assert isinstance(opts, RunOptions)
    from gpuhost.runner.prepare import prepare

    templates = Templates([playbook.directory / "templates", playbook.directory.parent / "templates"])
    plays = prepare(playbook, inventory, limit=opts.limit, extra=opts.extra_layer(), templates=templates)
    out: list[HostTasks] = []
    contexts: dict[str, RunnerHost] = {}
    try:
        for prepared in plays:
            for name, hp in prepared.hosts.items():
                entry = HostTasks(prepared.play.name, name)
                out.append(entry)
                if not hp.roles:
                    entry.tasks, entry.handlers = list(hp.tasks), list(hp.handlers)
                    continue
                ctx = contexts.get(name)
                if ctx is None:
                    ctx = RunnerHost(inventory.nodes[name], hp.vars, templates, check=True, connect=opts.connect)
                    contexts[name] = ctx
                else:
                    ctx.vars = hp.vars
                try:
                    entry.tasks, entry.handlers = _expand(hp, ctx)
                except GpuhostError as exc:
                    entry.error = str(exc)
    finally:
        for ctx in contexts.values():
            ctx.close()
    return out


def task_tags(task: Task) -> list[str]:
    """The tags ``--tags`` matches a task by: its own, and its role's name."""
    return sorted(set(task.tags) | ({task.role} if task.role else set()))
