"""PVE tasks: asynchronous API calls return a UPID; its status and log can be read back."""

from __future__ import annotations

import hashlib
import json
import os
import time
import traceback
from collections.abc import Callable

from gpuhost.lab.node import paths
from gpuhost.lab.node.errors import PveError


def new_upid(node: str, task_type: str, task_id: str, user: str) -> str:
    pid = os.getpid()
    pstart = int(time.monotonic() * 100) & 0xFFFFFFFF
    return f"UPID:{node}:{pid:08X}:{pstart:08X}:{int(time.time()):08X}:{task_type}:{task_id}:{user}:"


def _file(upid: str) -> str:
    return os.path.join(paths.TASKS_DIR, hashlib.sha1(upid.encode()).hexdigest() + ".json")


def warn(message: str) -> str:
    """A task log line of ``PVE::RESTEnvironment::warn`` (RESTEnvironment.pm:761-770: ``print STDERR
    "WARN: $message"`` into the task log, and the task's warning count goes up)."""
    return f"WARN: {message}"


def run(node: str, task_type: str, task_id: str, user: str, work: Callable[[], list[str] | None]) -> str:
    """Run ``work`` now and record it as a finished task; returns the UPID. ``work`` returns its log
    lines; lines made by :func:`warn` count as warnings. The end of the log and the exit status are
    pve-common's: RESTEnvironment.pm:652-666 (``TASK ERROR: …``, ``TASK WARNINGS: N`` when the
    warning count is set, else ``TASK OK``) and UPID.pm ``read_status`` (the status is ``OK``,
    ``WARNINGS: N`` or the error text)."""
    upid = new_upid(node, task_type, task_id, user)
    started = int(time.time())
    try:
        lines = work() or []
    except PveError as exc:
        lines = [exc.message.rstrip("\n"), f"TASK ERROR: {exc.message.rstrip()}"]
        exitstatus = exc.message.rstrip("\n")
    except Exception as exc:  # recorded like PVE records a dying worker
        lines = traceback.format_exc().splitlines() + [f"TASK ERROR: {exc}"]
        exitstatus = str(exc)
    else:
        warnings = sum(1 for line in lines if line.startswith("WARN: "))
        if warnings:
            exitstatus = f"WARNINGS: {warnings}"
            lines = lines + [f"TASK WARNINGS: {warnings}"]
        else:
            exitstatus = "OK"
            lines = lines + ["TASK OK"]
    os.makedirs(paths.TASKS_DIR, exist_ok=True)
    fields = upid.split(":")
    record = {
        "upid": upid,
        "node": node,
        "pid": int(fields[2], 16),
        "pstart": int(fields[3], 16),
        "starttime": started,
        "endtime": int(time.time()),
        "type": task_type,
        "id": task_id,
        "user": user,
        "status": "stopped",
        "exitstatus": exitstatus,
        "log": lines,
    }
    with open(_file(upid), "w") as fh:
        json.dump(record, fh)
    return upid


def _load(upid: str) -> dict[str, object]:
    try:
        with open(_file(upid)) as fh:
            record: dict[str, object] = json.load(fh)
            return record
    except FileNotFoundError:
        raise PveError("no such task", http_status=500) from None


def status(upid: str) -> dict[str, object]:
    record = _load(upid)
    return {k: v for k, v in record.items() if k != "log"}


def log(upid: str, start: int = 0, limit: int = 50) -> list[dict[str, object]]:
    """GET .../tasks/UPID/log: pve-manager API2/Tasks.pm ``read_task_log`` (``start`` default 0,
    ``limit`` default 50) through pve-common Tools.pm ``dump_logfile_by_filehandle``: lines from
    ``start`` on, at most ``limit`` of them, all of them when ``limit`` is 0; ``n`` counts from 1."""
    record = _load(upid)
    lines = _log_lines(record)
    chosen = lines[start:] if limit == 0 else lines[start : start + limit]
    return [{"n": start + i + 1, "t": line} for i, line in enumerate(chosen)]


def lines(upid: str) -> list[str]:
    """The whole task log (what a synchronous CLI task tees to stdout)."""
    return _log_lines(_load(upid))


def _log_lines(record: dict[str, object]) -> list[str]:
    log = record.get("log")
    return [str(line) for line in log] if isinstance(log, list) else []
