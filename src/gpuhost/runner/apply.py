"""Carry out an operation's actions on a host (consent was decided before, in :mod:`gpuhost.runner.run`)."""

from __future__ import annotations

import dataclasses
import hashlib
import re
import shlex
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpuhost.connection.base import Rebootable
from gpuhost.connection.write_script import WriteRequest
from gpuhost.core.actions import (
    Action,
    CopyToGuest,
    EditGuestConfig,
    InGuest,
    PveCall,
    RebootHost,
    RestartGuest,
    RestartService,
    RunCommand,
    WaitUntil,
    WriteFile,
    seconds,
)
from gpuhost.core.guest import Guest
from gpuhost.core.plan import Plan
from gpuhost.core.progress import ProgressStream
from gpuhost.core.result import CommandResult
from gpuhost.errors import CommandFailed, CommandTimeout, ConfigChanged, GpuhostError, OperationFailed
from gpuhost.runner.context import RunnerHost

if TYPE_CHECKING:
    from gpuhost.pve import config as pveconf


#: backups kept of a file whose text is secret (the env file's old API keys do not pile up forever)
SECRET_BACKUPS = 3


def apply(host: RunnerHost, action: Action) -> None:
    if isinstance(action, WriteFile):
        host.conn.write_file(
            action.path,
            action.content,
            mode=action.mode,
            backup=action.backup,
            backup_dir=action.backup_dir,
            keep=SECRET_BACKUPS if action.secret else None,  # each backup of a secret file holds an old secret
        )
    elif isinstance(action, RunCommand):
        owner = host.parent or host
        try:
            result = run_command(host, action)
        except CommandFailed as exc:  # CommandTimeout too: its stderr is the task's
            owner.command_errors.append(exc.stderr_tail)
            raise
        owner.command_output.append(result.stdout)
        owner.command_errors.append(result.stderr)
    elif isinstance(action, RestartService):
        host.conn.run(action.command)
    elif isinstance(action, RebootHost):
        reboot(host, action)
    elif isinstance(action, PveCall):
        call(host, action)
    elif isinstance(action, EditGuestConfig):
        locked_edit(host, action)
    elif isinstance(action, RestartGuest):
        call(host, action.call)
        host.restarts_needed.discard(action.guest)
        host.guest(action.guest).drop_connection()  # its old session ended with the restart
    elif isinstance(action, InGuest):
        apply(host.guest(action.guest), action.action)
        if isinstance(action.action, WaitUntil):
            root = host.parent or host
            root.waited[-1] = f"{action.guest}: {root.waited[-1]}"
    elif isinstance(action, CopyToGuest):
        copy_to_guest(host, action)
    elif isinstance(action, WaitUntil):
        wait_until(host, action)
    else:  # pragma: no cover - exhaustive
        raise TypeError(action)
    host.invalidate_facts()


def run_command(host: RunnerHost, action: RunCommand) -> CommandResult:
    """Run it; with ``action.progress`` its stdout streams through a :class:`ProgressStream` that reports
    the progress, and the result's stdout is the rest of the output."""
    if action.progress is None:
        return host.conn.run(action.command, ok_codes=action.ok_codes, timeout=action.timeout)
    stream = ProgressStream(host.name, action.progress)
    result = host.conn.run(action.command, check=False, timeout=action.timeout, stdout_sink=stream)  # type: ignore[arg-type]
    ok = not result.timed_out and result.exit_code in action.ok_codes
    result = dataclasses.replace(result, stdout=stream.close(ok))
    if result.timed_out:
        limit = host.conn.default_timeout if action.timeout is None else action.timeout
        raise CommandTimeout(action.command, limit or 0, result.stdout, result.stderr, host=host.conn.name)
    if not ok:
        raise CommandFailed(action.command, result.exit_code, result.stdout, result.stderr, host=host.conn.name)
    return result


def wait_until(host: RunnerHost, action: WaitUntil[Any]) -> None:
    """Poll until done (its message joins the task's reason); a failure runs the wait's failure actions on this
    host (a hung server is stopped), then fails the task with the wait's message."""
    from gpuhost.runner.wait import run_wait

    start = time.monotonic()
    outcome = run_wait(host, action)
    if outcome.ok:
        (host.parent or host).waited.append(f"{outcome.message} (after {seconds(time.monotonic() - start)})")
        return
    message = outcome.message
    for step in (*outcome.actions, *action.on_failure):
        try:
            apply(host, step)
        except GpuhostError as exc:
            message += f" ({step.describe()} failed too: {exc})"
    raise OperationFailed(message)


_GUEST_POWER = re.compile(r"/(qemu|lxc)/(\d+)/status/(start|stop|reboot|shutdown|reset|resume)$")


def copy_to_guest(host: RunnerHost, action: CopyToGuest) -> None:
    """The node's file, pushed into a container from the node (the controller never holds it)."""
    from gpuhost.connection.pct import PctConnection

    conn = host.guest(action.guest).conn
    if not isinstance(conn, PctConnection):
        raise OperationFailed(f"{host.name}: {action.guest} is not a container reached through pct")
    conn.push_from_node(action.source, action.dest, sha256=action.sha256, mode=action.mode)


def call(host: RunnerHost, action: PveCall) -> None:
    params = dict(action.params)
    if action.digest is not None:
        params["digest"] = action.digest
    try:
        result = host.pve.call(action.method, action.path, params)
    except OperationFailed as exc:
        from gpuhost.pve import edit

        target = edit.config_of_api_path(action.path)
        if action.digest is not None and target is not None and edit.is_modified_error(str(exc)):
            raise ConfigChanged(edit.config_file(*target), action.digest, "PVE: " + edit.MODIFIED) from None
        raise
    out = host.parent or host
    if action.wait:
        outcome = host.pve.wait_task(result)
        if outcome is not None and outcome.warnings:  # PVE counts WARNINGS: N a success (UPID.pm)
            out.warnings.extend(f"PVE task {outcome.exitstatus}: {w}" for w in outcome.warnings)
    out.warnings.extend(f"PVE: {w}" for w in host.pve.take_warnings())
    started = _GUEST_POWER.search(action.path)
    if started:  # a guest that started, stopped or rebooted: its old session (if any) is gone
        host.guest(Guest("qemu" if started.group(1) == "qemu" else "lxc", int(started.group(2)))).drop_connection()


def locked_edit(host: RunnerHost, action: EditGuestConfig) -> None:
    """The file write of :class:`EditGuestConfig`, run under PVE's per-guest flock after a digest re-check."""
    from gpuhost.pve import edit

    data = action.content.encode()
    request = WriteRequest(action.path, len(data), hashlib.sha256(data).hexdigest(), backup_dir=action.backup_dir)
    script = ["sh", "-c", edit.LOCKED_EDIT_SCRIPT, "gpuhost-locked-edit"]
    command = shlex.join([*script, action.lock, action.path, action.digest, request.command()])
    result = host.conn.run(command, input=data, ok_codes=(0, edit.DIGEST_MISMATCH))
    if result.exit_code == edit.DIGEST_MISMATCH:
        seen = result.stderr.strip().rsplit(" ", 1)[-1]
        raise ConfigChanged(action.path, action.digest, f"its digest is {seen} now, under {action.lock}")


def apply_plan(host: RunnerHost, plan: Plan, replan: Callable[[], Plan]) -> Plan:
    """Apply ``plan``. When a guest config changed between the read the plan was made from and the
    write (PVE's digest, or the re-read under the lock), read again and re-plan once: the other
    writer's change is kept. A second change fails, naming what the other writer changed."""
    try:
        _apply_all(host, plan)
        return plan
    except ConfigChanged as first:
        before = _planned_config(host, first.planned)
        host.invalidate_facts()
        again = replan()
        if _needs_consent(again) - _needs_consent(plan):
            raise OperationFailed(
                f"{first.path} was changed by another writer while gpuhost applied its plan, and the new plan "
                "needs a consent the first did not: rerun"
            ) from None
        try:
            _apply_all(host, again)
        except ConfigChanged as second:
            from gpuhost.pve import config as pveconf
            from gpuhost.pve import edit

            now = host.conn.read_file(second.path)
            changed = edit.what_changed(before, pveconf.parse(now, before.kind)) if before and now else []
            what = "; ".join(changed) or "no key differs from what gpuhost first read"
            raise OperationFailed(
                f"{second.path} changed again while gpuhost applied its re-planned change ({second.detail}). "
                f"Another writer is changing it (since gpuhost's first read: {what}; lock: "
                f"{_lock_of(now, second.path)}). Stop the other writer (a pct/qm set, a backup or migration "
                "task, another gpuhost) and rerun"
            ) from None
        return again


def _apply_all(host: RunnerHost, plan: Plan) -> None:
    for action in plan.actions:
        apply(host, action)


def _needs_consent(plan: Plan) -> set[type]:
    return {type(a) for a in plan.actions if isinstance(a, (RebootHost, RestartGuest))}


def _planned_config(host: RunnerHost, digest: str) -> pveconf.GuestConfig | None:
    """The config (from this run's fact cache) the plan was made from."""
    from gpuhost.pve import config as pveconf

    for value in host.cached_facts():
        if isinstance(value, pveconf.GuestConfig) and value.digest == digest:
            return value
    return None


def _lock_of(text: str | None, path: str) -> str:
    if text is None:
        return "the config file is gone"
    from gpuhost.pve import config as pveconf

    kind: pveconf.GuestKind = "lxc" if "/lxc/" in path else "qemu"
    lock = pveconf.parse(text, kind).get("lock")
    return f"'{lock}', a {lock} operation holds the guest" if lock else "none in the config"


def reboot(host: RunnerHost, action: RebootHost) -> None:
    conn = host.conn
    if not isinstance(conn, Rebootable):
        raise OperationFailed(
            f"{host.name}: will not reboot through a {type(conn).__name__} (the machine gpuhost runs on, or a guest)"
        )
    from gpuhost.pve.reboot_guard import after_reboot, before_reboot

    if action.pending_from is not None and conn.await_pending_reboot(action.pending_from, action.timeout):
        host.rebooted = True  # the reboot an earlier run asked for (its checks passed then) has happened
        host.reboot_needed = None
        return
    guard = before_reboot(host.conn, allow_serving=host.allow_reboot_serving)
    conn.reboot(action.timeout, action.record)
    after_reboot(host.conn, guard)
    host.rebooted = True
    host.reboot_needed = None
