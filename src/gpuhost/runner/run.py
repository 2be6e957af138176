"""Run a playbook: hosts in parallel (one thread and one connection each), tasks in order."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from gpuhost.connection import open_connection
from gpuhost.connection.base import Connection
from gpuhost.errors import ConnectionFailed, GpuhostError, PlaybookError
from gpuhost.inventory import Inventory
from gpuhost.inventory.models import NodeSpec
from gpuhost.operations.actions import Reboot
from gpuhost.operations.base import SkipTask
from gpuhost.playbook.models import Play, Playbook
from gpuhost.playbook.task import Task
from gpuhost.roles import get_role
from gpuhost.runner.apply import apply
from gpuhost.runner.context import HostContext
from gpuhost.runner.results import HostSummary, RunReport, TaskResult
from gpuhost.templating import Templates


@dataclass
class RunOptions:
    check: bool = False
    limit: str | None = None
    tags: frozenset[str] = frozenset()
    skip_tags: frozenset[str] = frozenset()
    forks: int = 10
    allow_reboot: bool = False
    allow_restart: bool = False
    extra_vars: dict[str, Any] = field(default_factory=dict)
    on_result: Callable[[TaskResult], None] | None = None
    connect: Callable[[NodeSpec], Connection] = open_connection


def _selected(task: Task, opts: RunOptions) -> bool:
    tags = set(task.tags) | ({task.role} if task.role else set())
    if opts.tags and not (tags & opts.tags) and "always" not in tags:
        return False
    return not (opts.skip_tags and tags & opts.skip_tags)


class _HostRun:
    """One host through one play: tasks in order, then its notified handlers."""

    def __init__(self, ctx: HostContext, play: Play, summary: HostSummary, opts: RunOptions,
                 emit: Callable[[TaskResult], None]) -> None:
        self.ctx, self.play, self.summary, self.opts, self.emit = ctx, play, summary, opts, emit

    def task(self, task: Task, *, handler: bool = False) -> TaskResult:
        ctx = self.ctx
        start = time.monotonic()
        status, reason, diff, error = "ok", "", "", None
        try:
            op = task.operation(ctx)
            plan = op.plan(ctx)
            reason, diff = plan.reason, plan.diff
            reboots = [a for a in plan.actions if isinstance(a, Reboot)]
            if not plan.changes:
                status = "ok"
            elif reboots and not ctx.allow_reboot:
                ctx.reboot_required = True
                status, reason = "skipped", f"reboot required ({reboots[0].reason}); rerun with --allow-reboot"
            elif ctx.check:
                status = "changed"
            else:
                for action in plan.actions:
                    apply(ctx, action)
                status = "changed"
        except SkipTask as exc:
            status, reason = "skipped", exc.reason
        except ConnectionFailed as exc:
            status, error = "failed", str(exc)
            self.summary.unreachable = True
        except GpuhostError as exc:
            status, error = "failed", str(exc)
        result = TaskResult(host=ctx.name, play=self.play.name, task=task.name, operation=task.kind,
                            status=status, reason=reason, duration=time.monotonic() - start, diff=diff,
                            error=error, handler=handler, role=task.role)  # type: ignore[arg-type]
        self.summary.count(result.status)
        self.emit(result)
        return result

    def run(self, tasks: list[Task], handlers: list[Task]) -> bool:
        """Run tasks, then notified handlers once each; False when the host failed."""
        notified: set[str] = set()
        for task in tasks:
            if task.is_flush:
                if not self.flush(handlers, notified):
                    return False
                continue
            if not _selected(task, self.opts):
                continue
            result = self.task(task)
            if result.status == "failed":
                return False
            if result.status == "changed":
                notified.update(task.notify)
        return self.flush(handlers, notified)

    def flush(self, handlers: list[Task], notified: set[str]) -> bool:
        """Run each notified handler once, in the order they are defined."""
        for handler in handlers:
            if handler.name in notified:
                notified.discard(handler.name)
                if self.task(handler, handler=True).status == "failed":
                    return False
        return True


def _expand(play: Play, ctx: HostContext) -> tuple[list[Task], list[Task]]:
    """Roles first (their tasks may depend on facts), then the play's own tasks."""
    tasks: list[Task] = []
    handlers: list[Task] = list(play.handlers)
    for ref in play.roles:
        role_cls = get_role(ref.name)
        if role_cls is None:
            raise PlaybookError(f"unknown role '{ref.name}'")
        role = role_cls()
        tasks += [_tagged(t, ref.name) for t in role.tasks(ctx)]
        handlers += [_tagged(t, ref.name) for t in role.handlers_for(ctx)]
    return tasks + list(play.tasks), handlers


def _tagged(task: Task, role: str) -> Task:
    return replace(task, role=role)


def _play_vars(play: Play, inventory: Inventory, node: str, opts: RunOptions) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for ref in play.roles:
        role_cls = get_role(ref.name)
        if role_cls is not None:
            merged.update(role_cls.defaults)
    merged.update(inventory.vars_for(node))
    for ref in play.roles:
        merged.update(ref.vars)
    merged.update(play.vars)
    merged.update(opts.extra_vars)
    return merged


def run_playbook(playbook: Playbook, inventory: Inventory, opts: RunOptions | None = None) -> RunReport:
    """Run every play; a host that fails is dropped from the rest of the run, others go on."""
    opts = opts or RunOptions()
    report = RunReport(playbook=str(playbook.path), check=opts.check)
    templates = Templates([playbook.directory / "templates", playbook.directory.parent / "templates"])
    limit = set(inventory.select(opts.limit)) if opts.limit else None
    contexts: dict[str, HostContext] = {}
    dead: set[str] = set()
    start = time.monotonic()
    lock = threading.Lock()

    def emit(result: TaskResult) -> None:
        with lock:
            report.results.append(result)
            if opts.on_result:
                opts.on_result(result)

    try:
        for play in playbook.plays:
            hosts = [h for h in inventory.select(play.hosts) if (limit is None or h in limit) and h not in dead]

            def one(name: str, play: Play = play) -> bool:
                summary = report.hosts.setdefault(name, HostSummary())
                ctx = contexts.get(name)
                variables = _play_vars(play, inventory, name, opts)
                if ctx is None:
                    # consent comes from the command line or from the inventory (allow_reboot: true)
                    ctx = HostContext(inventory.nodes[name], variables, templates, check=opts.check,
                                      allow_reboot=opts.allow_reboot or variables.get("allow_reboot") is True,
                                      allow_restart=opts.allow_restart or variables.get("allow_restart") is True,
                                      connect=opts.connect)
                    contexts[name] = ctx
                else:
                    ctx.vars = variables
                runner = _HostRun(ctx, play, summary, opts, emit)
                try:
                    tasks, handlers = _expand(play, ctx)
                except GpuhostError as exc:
                    summary.unreachable = isinstance(exc, ConnectionFailed)
                    runner.emit(TaskResult(name, play.name, "prepare roles", "facts", "failed", "", 0.0,
                                           error=str(exc)))
                    summary.count("failed")
                    return False
                ok = runner.run(tasks, handlers)
                summary.reboot_required = ctx.reboot_required
                summary.restart_required = sorted(ctx.restart_required)
                summary.rebooted = summary.rebooted or ctx.rebooted
                return ok

            for name in hosts:
                report.hosts.setdefault(name, HostSummary())
            with ThreadPoolExecutor(max_workers=max(1, opts.forks)) as pool:
                for name, ok in zip(hosts, pool.map(one, hosts)):
                    if not ok:
                        dead.add(name)
    finally:
        for ctx in contexts.values():
            ctx.close()
    report.duration = time.monotonic() - start
    return report
