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
from pathlib import Path
from typing import Any

from gpuhost.connection.base import Connection, Rebootable
from gpuhost.core.actions import InGuest, RebootHost, RestartGuest, RestartService
from gpuhost.core.operation import SkipTask
from gpuhost.core.progress import report as progress
from gpuhost.core.progress import task_started
from gpuhost.core.task import Task
from gpuhost.errors import ConnectionFailed, GpuConflict, GpuhostError, UsageError
from gpuhost.inventory.loader import Inventory
from gpuhost.inventory.models import NodeSpec
from gpuhost.playbook.models import Playbook
from gpuhost.playbook.variables import Layer, Origin
from gpuhost.runner import remembered
from gpuhost.runner.apply import apply_plan
from gpuhost.runner.connect import keep_connections, kept_reader, open_connection
from gpuhost.runner.context import RunnerHost
from gpuhost.runner.early import EarlyReads
from gpuhost.runner.handler_state import PendingHandlers
from gpuhost.runner.interrupt import Interrupted, signals_stop_the_run
from gpuhost.runner.node_lock import DEFAULT_WAIT
from gpuhost.runner.prefetch import prefetch
from gpuhost.runner.prepare import HostPlay, PreparedPlay, prepare
from gpuhost.runner.results import HostSummary, RunReport, Status, TaskResult
from gpuhost.runner.serial import batch_stops, batches
from gpuhost.runner.wait import interruptible
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
    #: a batch whose failed hosts exceed this share (percent) stops the run (``--max-fail-percentage``); without
    #: it only a batch whose every host failed does, as in Ansible
    max_fail_percentage: int | None = None
    connect: Callable[[NodeSpec], Connection] = open_connection
    #: a fact each host's state is read with at the end of its run, when every task of it succeeded (the
    #: provision commands' ``--drift`` baseline): (fact, *args) for a host's name. It is read ahead with the first
    #: batch, so a run that changes nothing pays no round trip for it; a change reads it again at the end.
    snapshot: Callable[[str], tuple[Any, ...]] | None = None
    #: where each host's reads are remembered from run to run (:mod:`gpuhost.runner.remembered`): a host's
    #: first contact reads what its last run of this playbook read, in one batch; None: not remembered
    remember: Path | None = None
    #: reads sent to the keeper before the run began (:mod:`gpuhost.runner.early`), taken when it reaches a node
    early: EarlyReads | None = None

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


def _with_serving_note(ctx: RunnerHost, actions: list[Any], reason: str) -> str:
    """A reboot that is only planned (``--check``, or no ``--allow-reboot``) says whether the node serves a model
    and so needs ``--reboot-serving`` (the probe only reads the process table)."""
    if ctx.parent is not None or not any(isinstance(a, RebootHost) for a in actions):
        return reason
    if not isinstance(ctx.conn, Rebootable):  # the machine gpuhost runs on, or a guest: never rebooted by gpuhost
        return reason
    from gpuhost.pve.reboot_guard import check_mode_note

    note = check_mode_note(ctx.conn, ctx.allow_reboot_serving)
    return f"{reason}; {note}" if note else reason


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
        #: the signal that interrupted the run, once one did (shared by every host of the run)
        self.stopping: list[str] = []
        #: the host's tasks of the later plays: their facts are read ahead with this play's
        self.ahead: list[Task] = []
        #: fact keys the runner itself reads for this host (the snapshot), read ahead with the tasks' facts
        self.also: list[tuple[Any, ...]] = []

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
        start, started_at = time.monotonic(), time.time()
        task_started(ctx.name, task.name)  # a live line (and `still` lines in logs) until the result
        status: Status = "ok"
        reason, diff, error = "", "", None
        ctx.command_output = []
        ctx.command_errors = []
        ctx.waited = []
        ctx.warnings = []
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
                if not plan.changes and not plan.waits:
                    status = "ok"
                elif refused is not None:
                    status, reason = refused
                    reason = _with_serving_note(ctx, plan.actions, reason)
                elif ctx.check:  # a wait is only described: nothing is polled in check mode
                    status = "changed" if plan.changes else "skipped"
                    said = "; ".join(f"would {w.describe()}" for w in plan.waits)
                    if not plan.changes:
                        reason = f"check mode: {said}"
                    elif said:
                        reason = f"{reason}; then {said}"
                    reason = _with_serving_note(ctx, plan.actions, reason)
                elif attempt == 1 and plan.changes and self.lock():
                    continue  # the node was read before this run held its lock: read it again
                else:
                    plan = apply_plan(ctx, plan, lambda: operation.plan(ctx))
                    reason, diff = plan.reason, plan.diff
                    if not plan.changes and ctx.waited:
                        reason = "; ".join(ctx.waited)
                    status = "changed" if plan.changes else "ok"
                break
        except SkipTask as exc:
            status, reason = "skipped", exc.reason
        except ConnectionFailed as exc:
            status, error = "failed", str(exc)
            self.summary.unreachable = not self.stopping  # closed by the run's own interruption: not the host
        except GpuhostError as exc:
            status, error = "failed", str(exc)
        except Exception as exc:  # noqa: BLE001 - one host's bug must not end the others' run
            status, error = "failed", _internal(exc)
        if status == "failed" and self.stopping:
            error = _stop(self.stopping[0])
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
            warnings=tuple(dict.fromkeys(ctx.warnings)),
            stderr="".join(e if e.endswith("\n") or not e else e + "\n" for e in ctx.command_errors),
            started_at=started_at,
        )
        self.summary.count(result.status)
        self.emit(result)
        return result

    def run(self, tasks: list[Task], handlers: list[Task]) -> bool:
        """Run tasks, then notified handlers once each; False when the host failed. Notified handlers are
        recorded on the node until they ran, and those an earlier run left pending are notified again.
        The facts of :attr:`ahead` (the host's tasks of the later plays) are read in the same batches: a change
        invalidates every fact read, so they are read again if this play changes the host."""
        self.pending = PendingHandlers(self.ctx, {h.name for h in handlers})
        mine = [t for t in tasks if t.is_flush or _selected(t, self.opts)]
        later = [t for t in self.ahead if not t.is_flush and _selected(t, self.opts)]
        try:
            prefetch(self.ctx, mine + later, [*self.pending.reads(), *self.also])
        except GpuhostError:
            pass  # reading ahead is an optimisation: the task that needs the fact reports the problem
        self.loaded = self.pending.load()
        self.notified = set(self.loaded)
        for task in tasks:
            if task.is_flush:
                if not self.flush(handlers):
                    return False
                continue
            if self.stopping:
                return False
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


def _ahead(plays: list[PreparedPlay], after: PreparedPlay, name: str, ctx: RunnerHost) -> list[Task]:
    """The host's tasks in the plays after ``after``, as far as they can be expanded from the facts read so far
    (reading ahead is an optimisation: a play whose roles cannot be expanded yet is left out)."""
    out: list[Task] = []
    for later in plays[plays.index(after) + 1 :]:
        hp = later.hosts.get(name)
        if hp is None:
            continue
        try:
            out += _expand(hp, ctx)[0]
        except Exception:  # noqa: BLE001 - that play expands (and reports) its roles itself when it runs
            continue
    return out


def run_playbook(playbook: Playbook, inventory: Inventory, opts: RunOptions | None = None) -> RunReport:
    """Check everything, then run every play; a host that fails is dropped from the rest of the run."""
    opts = opts or RunOptions()
    templates = Templates([playbook.directory / "templates", playbook.directory.parent / "templates"])
    plays = prepare(playbook, inventory, limit=opts.limit, extra=opts.extra_layer(), templates=templates)
    check_reboot_serving(opts.reboot_serving, [h for p in plays for h in p.hosts])
    if opts.start_at_task is not None:
        from gpuhost.runner.start_at import check_start_at_task

        check_start_at_task(playbook, opts.start_at_task)
    if opts.limit and not any(p.hosts for p in plays):
        hosts = ", ".join(dict.fromkeys(p.play.hosts for p in plays)) or "none"
        raise UsageError(f"--limit '{opts.limit}' selects no host of the playbook's plays (hosts: {hosts})")
    if opts.connect is open_connection:  # real hosts: their keys and their API's certificate, before any change
        from gpuhost.inventory.key_files import check_key_files
        from gpuhost.runner.connect import probe_api_certificates

        check_key_files(inventory, list(dict.fromkeys(h for p in plays for h in p.hosts)))
        probe_api_certificates(inventory, list(dict.fromkeys(h for p in plays for h in p.hosts)))
    if opts.on_start is not None:
        opts.on_start(list(dict.fromkeys(h for p in plays for h in p.hosts)))
    return execute(playbook, inventory, plays, opts, templates)


def _stop(signal_name: str) -> str:
    return (
        f"interrupted by {signal_name}: the run stopped before it finished on this host (its remote commands were "
        "stopped, its run lock let go); rerun to converge"
    )


def _mark_interrupted(report: RunReport, signal_name: str, emit: Callable[[TaskResult], None]) -> None:
    """Every host the signal caught before it failed: one failed result saying so (the recap's exit 1)."""
    noted = {r.host for r in report.results if r.error == _stop(signal_name)}
    for name, summary in report.hosts.items():
        if name not in noted and not (summary.failed or summary.unreachable):
            emit(TaskResult(name, "", "run", "runner", "failed", "", 0.0, error=_stop(signal_name)))
            summary.count("failed")


def check_reboot_serving(named: frozenset[str], selected: list[str]) -> None:
    """``--reboot-serving NODE`` names a node this run works on; anything else is a mistyped consent (exit 2)."""
    stray = sorted(n for n in named if n not in selected)
    if stray:
        shown = ", ".join(dict.fromkeys(selected)) or "none"
        raise UsageError(
            f"--reboot-serving {', '.join(stray)}: not a node this run works on (its nodes: {shown}); name a node "
            "of the inventory that the playbook and --limit select"
        )


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

    last_play = {name: prepared for prepared in plays for name in prepared.hosts}

    record = (
        remembered.records(opts.remember, Path(playbook.path), Path(inventory.path))
        if opts.remember is not None
        else None
    )
    last: dict[str, remembered.Record] = {}  # each host's record, as this run read it

    def one(prepared: PreparedPlay, name: str) -> bool:
        summary = report.hosts.setdefault(name, HostSummary())
        hp = prepared.hosts[name]
        node = inventory.nodes[name]
        ctx = contexts.get(name)
        first = ctx is None
        if ctx is None:
            kept = kept_reader(node) if opts.connect is open_connection else None
            if opts.early is not None:
                kept = opts.early.reader(name, kept)
            ctx = RunnerHost(node, hp.vars, templates, check=opts.check, connect=opts.connect, kept=kept)
            contexts[name] = ctx
        else:
            ctx.vars = hp.vars
        ctx.allow_reboot_serving = name in opts.reboot_serving
        consent = (opts.allow_reboot or node.allow_reboot, opts.allow_restart or node.allow_restart)
        runner = _HostRun(ctx, prepared.play.name, summary, opts, consent, emit)
        runner.reached = reached.setdefault(name, runner.reached)
        runner.stopping = stopped
        try:
            try:
                if first and record is not None:
                    early = opts.early.record(record(name)) if opts.early is not None else None
                    last[name] = early if early is not None else remembered.load(record(name))
                    remembered.read(ctx, last[name])
                tasks, handlers = _expand(hp, ctx)
            except GpuhostError as exc:
                summary.unreachable = summary.unreachable or isinstance(exc, ConnectionFailed)
                summary.refused = summary.refused or isinstance(exc, GpuConflict)
                runner.emit(
                    TaskResult(name, prepared.play.name, "prepare roles", "facts", "failed", "", 0.0, error=str(exc))
                )
                summary.count("failed")
                return False
            runner.ahead = _ahead(plays, prepared, name, ctx)
            snapshot = opts.snapshot(name) if opts.snapshot is not None and not opts.check else None
            runner.also = [snapshot] if snapshot is not None else []
            ok = runner.run(tasks, handlers)
            if ok and snapshot is not None and prepared is last_play.get(name) and not stopped:
                try:
                    summary.snapshot = ctx.fact(*snapshot)
                except GpuhostError:
                    pass  # not recorded: the caller says so (the run itself succeeded)
            return ok
        except Exception as exc:  # noqa: BLE001 - the recap and --json always print
            if stopped:  # its connection was closed because the run was interrupted
                summary.count("failed")
                runner.emit(
                    TaskResult(name, prepared.play.name, "run", "runner", "failed", "", 0.0, error=_stop(stopped[0]))
                )
                return False
            lost = isinstance(exc, ConnectionFailed)
            summary.unreachable = summary.unreachable or lost
            error = str(exc) if isinstance(exc, GpuhostError) else _internal(exc)
            runner.emit(TaskResult(name, prepared.play.name, "run", "runner", "failed", "", 0.0, error=error))
            summary.count("failed")
            return False
        finally:
            summary.reboot_required = ctx.reboot_needed is not None
            summary.restart_required = sorted(g.id for g in ctx.restarts_needed)
            summary.restart_guests = [str(g) for g in sorted(ctx.restarts_needed, key=lambda g: (g.id, g.kind))]
            summary.rebooted = summary.rebooted or ctx.rebooted
            summary.round_trips = ctx.total_round_trips()

    stopped: list[str] = []  # the signal that interrupted the run (runner.interrupt)
    try:
        # Ctrl-C or SIGTERM: every wait ends at its next tick (interruptible), and the run stops with an end
        # event and a recap (signals_stop_the_run raises Interrupted)
        with signals_stop_the_run(), interruptible():
            _run_plays(
                plays, report, dead, one, opts, emit, on_interrupt=lambda exc: _close_all(exc, stopped, contexts)
            )
    except Interrupted as exc:
        if not stopped:
            stopped.append(exc.signal_name)
    finally:
        for ctx in contexts.values():
            ctx.close()
    if record is not None and not stopped:
        good = [n for n in contexts if not (report.hosts[n].failed or report.hosts[n].unreachable)]
        for name in good:
            _remember(record(name), contexts[name], last.get(name))
        if opts.connect is open_connection:  # for the next run, each node's connection kept (ssh.persist)
            keep_connections([inventory.nodes[n] for n in good])
    if stopped:
        _mark_interrupted(report, stopped[0], emit)
    report.duration = time.monotonic() - start
    failed = any(s.failed or s.unreachable for s in report.hosts.values())
    if opts.start_at_task is not None and reached and not failed and not any(f[0] for f in reached.values()):
        raise UsageError(
            f"--start-at-task '{opts.start_at_task}': no task of that name in this run, so nothing ran "
            "(gpuhost run --list-tasks shows the names)"
        )
    return report


def _remember(path: Path, ctx: RunnerHost, last: remembered.Record | None) -> None:
    try:
        remembered.save(path, ctx, last)
    except OSError:
        pass  # an optimisation: the next run reads its facts as it would have without a record


def _close_all(exc: Interrupted, stopped: list[str], contexts: dict[str, RunnerHost]) -> None:
    """An interrupted run: its signal noted, every host's connection closed (the hosts' commands end with their
    sessions; the workers fail fast)."""
    stopped.append(exc.signal_name)
    for ctx in list(contexts.values()):
        ctx.close()


def _run_plays(
    plays: list[PreparedPlay],
    report: RunReport,
    dead: set[str],
    one: Callable[[PreparedPlay, str], bool],
    opts: RunOptions,
    emit: Callable[[TaskResult], None],
    *,
    on_interrupt: Callable[[Interrupted], None],
) -> None:
    """Every play, its hosts batch after batch, a batch's hosts in parallel; a failed host is dropped. A failed
    batch (:func:`gpuhost.runner.serial.batch_stops`) ends the run: the hosts after it are reported not run."""
    for prepared in plays:
        hosts = [h for h in prepared.hosts if h not in dead]
        for name in hosts:
            report.hosts.setdefault(name, HostSummary())
        groups = batches(hosts, opts.serial or prepared.play.serial)
        for number, batch in enumerate(groups, start=1):
            if len(groups) > 1:
                for name in batch:
                    progress(name, "serial", f"batch {number} of {len(groups)}")
            pool = ThreadPoolExecutor(max_workers=max(1, opts.forks))
            try:
                failed = [
                    name
                    for name, ok in zip(batch, pool.map(lambda h, p=prepared: one(p, h), batch), strict=False)
                    if not ok
                ]
            except Interrupted as exc:
                on_interrupt(exc)
                raise
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
            dead.update(failed)
            why = batch_stops(len(batch), len(failed), opts.max_fail_percentage)
            if why is not None and number < len(groups):
                reason = (
                    f"not run: batch {number} of {len(groups)} failed ({', '.join(failed)}: {why}); a rolling run "
                    "stops after a failed batch"
                )
                for name in (h for g in groups[number:] for h in g):
                    report.hosts[name].count("skipped")
                    emit(TaskResult(name, prepared.play.name, "rolling run stopped", "serial", "skipped", reason, 0.0))
                return
