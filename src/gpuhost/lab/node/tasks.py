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


def run(node: str, task_type: str, task_id: str, user: str, work: Callable[[], list[str] | None]) -> str:
    """Run ``work`` now and record it as a finished task; returns the UPID."""
    upid = new_upid(node, task_type, task_id, user)
    started = int(time.time())
    try:
        lines = work() or []
        exitstatus = "OK"
    except PveError as exc:
        lines = [exc.message.rstrip("\n"), f"TASK ERROR: {exc.message.rstrip()}"]
        exitstatus = exc.message.rstrip("\n")
    except Exception as exc:  # recorded like PVE records a dying worker
        lines = traceback.format_exc().splitlines() + [f"TASK ERROR: {exc}"]
        exitstatus = str(exc)
    else:
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
            return json.load(fh)
    except FileNotFoundError:
        raise PveError("no such task", http_status=500) from None


def status(upid: str) -> dict[str, object]:
    record = _load(upid)
    return {k: v for k, v in record.items() if k != "log"}


def log(upid: str) -> list[dict[str, object]]:
    record = _load(upid)
    return [{"n": i + 1, "t": line} for i, line in enumerate(record["log"])]  # type: ignore[arg-type]
