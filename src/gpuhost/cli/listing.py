"""Printing for ``--list-hosts``, ``--list-tasks`` and ``--list-tags`` (plain lines, one item each)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuhost.cli.flags import RunFlags
    from gpuhost.inventory.loader import Inventory
    from gpuhost.playbook.models import Playbook


def print_listing(
    book: Playbook, inv: Inventory, flags: RunFlags, extra_vars: dict[str, Any], extra_origins: dict[str, Any]
) -> int:
    """Print what was asked; returns 0, or 1 when a host's role tasks could not be read."""
    from gpuhost.cli.output import console
    from gpuhost.runner.listing import host_tasks, play_hosts, task_tags
    from gpuhost.runner.run import RunOptions

    def out(text: str) -> None:
        console.print(text, markup=False)

    if flags.list_hosts:
        for ph in play_hosts(book, inv, flags.limit):
            out(f"play: {ph.play} (hosts: {ph.pattern}) — {len(ph.hosts)} host{'s' if len(ph.hosts) != 1 else ''}")
            for h in ph.hosts:
                out(f"  {h}")
    if not (flags.list_tasks or flags.list_tags):
        return 0
    opts = RunOptions(check=True, limit=flags.limit, extra_vars=extra_vars, extra_origins=extra_origins)
    listed = host_tasks(book, inv, opts)
    failed = False
    if flags.list_tasks:
        play = None
        for entry in listed:
            if entry.play != play:
                play = entry.play
                out(f"play: {play}")
            out(f"  {entry.host}")
            if entry.error:
                failed = True
                out(f"    cannot list this host's role tasks: {entry.error}")
                continue
            for task in entry.tasks:
                if task.is_flush:
                    out("    (flush handlers)")
                    continue
                names = task_tags(task)
                out(f"    {task.name}" + (f"  [{', '.join(names)}]" if names else ""))
            for handler in entry.handlers:
                out(f"    handler: {handler.name}")
    if flags.list_tags:
        by_play: dict[str, set[str]] = {}
        for entry in listed:
            play_tags = by_play.setdefault(entry.play, set())
            for task in entry.tasks:
                play_tags.update(task_tags(task))
            failed = failed or entry.error is not None
        for play_name, tag_set in by_play.items():
            out(f"play: {play_name}  tags: {', '.join(sorted(tag_set)) or '(none)'}")
    return 1 if failed else 0
