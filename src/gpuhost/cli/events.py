"""``--json-events``: one JSON object per line as the run goes (JSON Lines), schema ``gpuhost.events/1``.

Three kinds of event, each a line of its own (``docs/schema/run-events.schema.json``):

* ``start`` — once, before the first host is contacted: gpuhost's version, the playbook, the hosts;
* ``task`` — one per task and host as it finishes (the same fields as a task of ``--json``);
* ``end`` — once, after the recap: the exit code and each host's summary.

A consumer reads line by line and never waits for the run to end to see a result.
"""

from __future__ import annotations

import json
import threading
import time
from typing import TYPE_CHECKING, Any, TextIO

from gpuhost import __version__
from gpuhost.redact import redact

if TYPE_CHECKING:
    from gpuhost.runner.results import RunReport, TaskResult

SCHEMA = "gpuhost.events/1"


def _stamp(event: str) -> dict[str, Any]:
    return {"schema": SCHEMA, "event": event, "time": round(time.time(), 3)}


def start_event(playbook: str, hosts: list[str], check: bool) -> dict[str, Any]:
    from gpuhost.runner.results import shown_path

    return {
        **_stamp("start"),
        "gpuhost_version": __version__,
        "playbook": shown_path(playbook),
        "check": check,
        "hosts": list(hosts),
    }


def task_event(result: TaskResult) -> dict[str, Any]:
    return {**_stamp("task"), **result.to_json()}


def end_event(report: RunReport) -> dict[str, Any]:
    return {
        **_stamp("end"),
        "ok": not report.failed,
        "exit_code": report.exit_code,
        "duration_s": round(report.duration, 4),
        "hosts": {name: s.to_json() for name, s in report.hosts.items()},
    }


class EventWriter:
    """Writes each event as one redacted line and flushes it, so a pipe sees it at once."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._lock = threading.Lock()

    def write(self, event: dict[str, Any]) -> None:
        line = redact(json.dumps(event, sort_keys=False, separators=(",", ":")))
        with self._lock:
            self.stream.write(line + "\n")
            self.stream.flush()

    def __call__(self, result: TaskResult) -> None:
        self.write(task_event(result))
