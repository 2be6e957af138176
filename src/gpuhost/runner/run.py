"""Run a playbook: checked whole first (:mod:`gpuhost.runner.prepare`), then hosts in parallel (one thread
and one connection each), tasks in order. Consent to reboot a node or restart a guest comes only from the
operator: the command-line flags or the inventory's per-node ``allow_reboot``/``allow_restart``."""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from gpuhost.connection.base import Connection
from gpuhost.core.actions import InGuest, RebootHost, RestartGuest, RestartService
from gpuhost.core.operation import SkipTask
from gpuhost.core.task import Task
from gpuhost.errors import ConnectionFailed, GpuhostError
from gpuhost.inventory.loader import Inventory
from gpuhost.inventory.models import NodeSpec
from gpuhost.playbook.models import Playbook
from gpuhost.playbook.variables import Layer, Origin
from gpuhost.runner.apply import apply_plan
from gpuhost.runner.connect import open_connection
from gpuhost.runner.context import RunnerHost
from gpuhost.runner.handler_state import PendingHandlers
from gpuhost.runner.node_lock import DEFAULT_WAIT
from gpuhost.runner.prefetch import prefetch
from gpuhost.runner.prepare import HostPlay, PreparedPlay, prepare
from gpuhost.runner.results import HostSummary, RunReport, Status, TaskResult
from gpuhost.runner.serial import batches
from gpuhost.templating import Templates


@dataclass
class RunOptions:
    check: bool = False
    limit: str | None = None
    tags: frozenset[str] = frozenset()
    skip_tags: frozenset[str] = frozenset()
    forks: int = 10
    #: seconds to wait for another run's lock on a node before that node fails, naming the holder
    lock_wait: float = DEFAULT_WAIT
    allow_reboot: bool = False
    allow_restart: bool = False
    extra_vars: dict[str, Any] = field(default_factory=dict)
    #: where each extra variable came from (``-e`` number, ``--ctid``) for error messages
    extra_origins: dict[str, Origin] = field(default_factory=dict)
    on_result: Callable[[TaskResult], None] | None = None
    #: called once with the selected hosts after the run was checked, before any host is contacted
    on_start: Callable[[list[str]], None] | None = None
    #: tasks before the first one of this name are not run (``--start-at-task``)
    start_at_task: str | None = None
    #: hosts at a time, batch after batch, for every play (``--serial``; overrides a play's ``serial``)
    serial: int | None = None
    #: nodes that may reboot although they serve a model (``--reboot-serving``)
    reboot_serving: frozenset[str] = frozenset()
    connect: Callable[[NodeSpec], Connection] = open_connection

    def extra_layer(self) -> Layer:
        origins = {k: self.extra_origins.get(k, Origin("-e")) for k in self.extra_vars}
        return Layer(dict(self.extra_vars), origins)


def _selected(task: Task, opts: RunOptions) -> bool:
    tags = set(task.tags) | ({task.role} if task.role else set())
    if opts.tags and not (tags & opts.tags) and "always" not in tags:
        return False
    return not (opts.skip_tags and tags & opts.skip_tags)


def _internal(exc: BaseException) -> str:
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" at {frame.filename.rsplit('/', 1)[-1]}:{frame.lineno}" if frame else ""
    return f"internal error: {type(exc).__name__}: {exc}{where}"


class _HostRun:
    """One host through one play: tasks in order, then its notified handlers."""

    def __init__(
        self,
        ctx: RunnerHost,
        play: str,
        summary: HostSummary,
        opts: RunOptions,
        consent: tuple[bool, bool],
        emit: Callable[[TaskResult], None],
    ) -> None:
        self.ctx, self.play, self.summary, self.opts, self.emit = ctx, play, summary, opts, emit
        self.allow_reboot, self.allow_restart = consent
        self.waited = False  # the last task's plan had a staged change waiting for a restart
        self.refused = False
        self.pending = PendingHandlers(ctx, set())
        self.notified: set[str] = set()  # handlers to run at the next flush
        self.loaded: set[str] = set()  # those of them that an earlier run left pending on the node
        self.kept: set[str] = set()  # handlers refused for want of consent: still pending on the node
        #: one flag per host, shared by its plays: whether ``--start-at-task`` has been reached
        self.reached: list[bool] = [opts.start_at_task is None]

    def _decide(self, plan_actions: list[Any]) -> tuple[Status, str] | None:
        """A consent the operator did not give turns the task into 'skipped', recorded for the recap."""
        ctx = self.ctx
        reboots = [a for a in plan_actions if isinstance(a, RebootHost)]
        if reboots and not self.allow_reboot:
            ctx.reboot_needed = reboots[0].reason
            return "skipped", f"reboot required ({reboots[0].reason}); rerun with --allow-reboot"
        restarts = [a for a in plan_actions if isinstance(a, RestartGuest)]
        if restarts and not self.allow_restart:
            ctx.restarts_needed.update(a.guest for a in restarts)
            names = ", ".join(str(a.guest) for a in restarts)
            return "skipped", f"{names} must restart for its new configuration to apply; rerun with --allow-restart"
        inner = [a.action if isinstance(a, InGuest) else a for a in plan_actions]
        services = [a for a in inner if isinstance(a, RestartService)]
        if services and not self.allow_restart:
            names = ", ".join(a.unit for a in services)
            return "skipped", f"{names} runs an older configuration and must restart; rerun with --allow-restart"
        return None

    def lock(self) -> bool:
        """Take the node's run lock before the first change (see :mod:`gpuhost.runner.node_lock`). True when
        it was taken just now: facts are read again, and handlers another run ran meanwhile are forgotten."""
        if not self.ctx.take_run_lock(self.opts.lock_wait):
            return False
        self.ctx.invalidate_facts()
        still = self.pending.load()
        self.notified -= self.loaded - still  # pending when this run started, run since by the other run
        self.loaded = still
        return True

    def task(self, task: Task, *, handler: bool = False) -> TaskResult:
        ctx = self.ctx
        start = time.monotonic()
        status: Status = "ok"
        reason, diff, error = "", "", None
        ctx.command_output = []
        try:
            operation = task.operation_for(ctx)
            for attempt in (1, 2):
                plan = operation.plan(ctx)
                reason, diff = plan.reason, plan.diff
                self.waited = bool(plan.waiting)
                if plan.waiting:  # staged, applies at the guest's next start: the recap says it must restart
                    ctx.restarts_needed.update(plan.waiting)
                refused = self._decide(plan.actions) if plan.changes else None
                self.refused = refused is not None
                if not plan.changes:
                    status = "ok"
                elif refused is not None:
                    status, reason = refused
                elif ctx.check:
                    status = "changed"
                elif attempt == 1 and self.lock():
                    continue  # the node was read before this run held its lock: read it again
                else:
                    plan = apply_plan(ctx, plan, lambda: operation.plan(ctx))
                    reason, diff = plan.reason, plan.diff
                    status = "changed" if plan.changes else "ok"
                break
        except SkipTask as exc:
            status, reason = "skipped", exc.reason
        except ConnectionFailed as exc:
            status, error = "failed", str(exc)
            self.summary.unreachable = True
        except GpuhostError as exc:
            status, error = "failed", str(exc)
        except Exception as exc:  # noqa: BLE001 - one host's bug must not end the others' run
            status, error = "failed", _internal(exc)
        result = TaskResult(
            host=ctx.name,
            play=self.play,
            task=task.name,
            operation=task.kind,
            status=status,
            reason=reason,
            duration=time.monotonic() - start,
            diff=diff,
            error=error,
            handler=handler,
            role=task.role,
            stdout="".join(ctx.command_output),
        )
        self.summary.count(result.status)
        self.emit(result)
        return result

    def run(self, tasks: list[Task], handlers: list[Task]) -> bool:
        """Run tasks, then notified handlers once each; False when the host failed. Notified handlers are
        recorded on the node until they ran, and those an earlier run left pending are notified again."""
        self.pending = PendingHandlers(self.ctx, {h.name for h in handlers})
        try:
            prefetch(self.ctx, [t for t in tasks if t.is_flush or _selected(t, self.opts)], self.pending.reads())
        except GpuhostError:
            pass  # reading ahead is an optimisation: the task that needs the fact reports the problem
        self.loaded = self.pending.load()
        self.notified = set(self.loaded)
        for task in tasks:
            if task.is_flush:
                if not self.flush(handlers):
                    return False
                continue
            if not self.reached[0]:
                if task.name != self.opts.start_at_task:
                    continue
                self.reached[0] = True
            if not _selected(task, self.opts):
                continue
            result = self.task(task)
            if result.status == "failed":
                return False
            if task.notify and (result.status == "changed" or (result.status == "ok" and self.waited)):
                self.notified.update(task.notify)  # a staged change waits for the handler (a restart) too
                self.pending.save(self.notified | self.kept)
        return self.flush(handlers)

    def flush(self, handlers: list[Task]) -> bool:
        """Run each notified handler once, in the order they are defined. One that failed, or was refused
        for want of the operator's consent, stays recorded on the node for the next run."""
        for handler in handlers:
            if handler.name in self.notified:
                self.notified.discard(handler.name)
                self.loaded.discard(handler.name)
                self.refused = False
                result = self.task(handler, handler=True)
                if result.status == "failed" or self.refused:
                    self.kept.add(handler.name)
                self.pending.save(self.notified | self.kept)
                if result.status == "failed":
                    return False
        return True


def _expand(hp: HostPlay, ctx: RunnerHost) -> tuple[list[Task], list[Task]]:
    """Roles first (their tasks may depend on facts), then the play's own tasks."""
    tasks: list[Task] = []
    handlers: list[Task] = list(hp.handlers)
    for rr in hp.roles:
        tasks += [t.in_role(rr.role.name) for t in rr.role.tasks(ctx, rr.vars)]
        handlers += rr.handlers
    return tasks + hp.tasks, handlers


def run_playbook(playbook: Playbook, inventory: Inventory, opts: RunOptions | None = None) -> RunReport:
    """Check everything, then run every play; a host that fails is dropped from the rest of the run."""
    opts = opts or RunOptions()
    templates = Templates([playbook.directory / "templates", playbook.directory.parent / "templates"])
    plays = prepare(playbook, inventory, limit=opts.limit, extra=opts.extra_layer(), templates=templates)
    if opts.start_at_task is not None:
        from gpuhost.runner.start_at import check_start_at_task

        check_start_at_task(playbook, opts.start_at_task)
    if opts.on_start is not None:
        opts.on_start(list(dict.fromkeys(h for p in plays for h in p.hosts)))
    return execute(playbook, inventory, plays, opts, templates)


def execute(
    playbook: Playbook, inventory: Inventory, plays: list[PreparedPlay], opts: RunOptions, templates: Templates
) -> RunReport:
    report = RunReport(playbook=str(playbook.path), check=opts.check)
    contexts: dict[str, RunnerHost] = {}
    reached: dict[str, list[bool]] = {}
    dead: set[str] = set()
    start = time.monotonic()
    lock = threading.Lock()

    def emit(result: TaskResult) -> None:
        with lock:
            report.results.append(result)
            if opts.on_result:
                opts.on_result(result)

    def one(prepared: PreparedPlay, name: str) -> bool:
        summary = report.hosts.setdefault(name, HostSummary())
        hp = prepared.hosts[name]
        node = inventory.nodes[name]
        ctx = contexts.get(name)
        if ctx is None:
            ctx = RunnerHost(node, hp.vars, templates, check=opts.check, connect=opts.connect)
            contexts[name] = ctx
        else:
            ctx.vars = hp.vars
        ctx.allow_reboot_serving = name in opts.reboot_serving
        consent = (opts.allow_reboot or node.allow_reboot, opts.allow_restart or node.allow_restart)
        runner = _HostRun(ctx, prepared.play.name, summary, opts, consent, emit)
        runner.reached = reached.setdefault(name, runner.reached)
        try:
            try:
                tasks, handlers = _expand(hp, ctx)
            except GpuhostError as exc:
                summary.unreachable = summary.unreachable or isinstance(exc, ConnectionFailed)
                runner.emit(
                    TaskResult(name, prepared.play.name, "prepare roles", "facts", "failed", "", 0.0, error=str(exc))
                )
                summary.count("failed")
                return False
            return runner.run(tasks, handlers)
        except Exception as exc:  # noqa: BLE001 - the recap and --json always print
            lost = isinstance(exc, ConnectionFailed)
            summary.unreachable = summary.unreachable or lost
            error = str(exc) if isinstance(exc, GpuhostError) else _internal(exc)
            runner.emit(TaskResult(name, prepared.play.name, "run", "runner", "failed", "", 0.0, error=error))
            summary.count("failed")
            return False
        finally:
            summary.reboot_required = ctx.reboot_needed is not None
            summary.restart_required = sorted(g.id for g in ctx.restarts_needed)
            summary.rebooted = summary.rebooted or ctx.rebooted
            summary.round_trips = ctx.total_round_trips()

    try:
        for prepared in plays:
            hosts = [h for h in prepared.hosts if h not in dead]
            for name in hosts:
                report.hosts.setdefault(name, HostSummary())
            for batch in batches(hosts, opts.serial or prepared.play.serial):
                with ThreadPoolExecutor(max_workers=max(1, opts.forks)) as pool:
                    for name, ok in zip(batch, pool.map(lambda h, p=prepared: one(p, h), batch), strict=False):
                        if not ok:
                            dead.add(name)
    finally:
        for ctx in contexts.values():
            ctx.close()
    report.duration = time.monotonic() - start
    return report
