"""What a run produced: one :class:`TaskResult` per task and host, a summary per host.

:meth:`RunReport.to_json` is the stable ``--json`` object; its schema is
``docs/schema/run-report.schema.json`` (``schema`` = ``gpuhost.run/1``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gpuhost.redact import redact

Status = Literal["ok", "changed", "failed", "skipped"]
SCHEMA = "gpuhost.run/1"


def shown_path(path: str | Path) -> str:
    """``path`` relative to the working directory when it lies under it (reports travel to tickets and CI)."""
    p = Path(path)
    if not p.is_absolute():
        return str(p)
    try:
        return str(p.relative_to(Path(os.getcwd())))
    except ValueError:
        return str(p)


def _iso(epoch: float | None) -> str | None:
    """UTC, to the millisecond: ``2026-12-01T19:40:05.123Z``."""
    if epoch is None:
        return None
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch)) + f".{int(epoch % 1 * 1000):03d}Z"


@dataclass(frozen=True)
class TaskResult:
    host: str
    play: str
    task: str
    operation: str
    status: Status
    reason: str
    duration: float
    diff: str = ""
    error: str | None = None
    handler: bool = False
    role: str | None = None
    #: what the task's commands printed on stdout (a ``command`` task's output)
    stdout: str = ""
    #: what PVE warned about (a task that ended ``WARNINGS: N``, pvesh's stderr lines)
    warnings: tuple[str, ...] = ()
    #: what they printed on stderr (a failed command's tail included)
    stderr: str = ""
    #: when the task began (seconds since the epoch, this machine's clock)
    started_at: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "play": self.play,
            "task": self.task,
            "operation": self.operation,
            "role": self.role,
            "handler": self.handler,
            "status": self.status,
            "changed": self.status == "changed",
            "reason": redact(self.reason),
            "diff": redact(self.diff),
            "error": redact(self.error) if self.error else None,
            "stdout": redact(self.stdout),
            "warnings": [redact(w) for w in self.warnings],
            "stderr": redact(self.stderr),
            "started_at": _iso(self.started_at),
            "duration_s": round(self.duration, 4),
        }


@dataclass
class HostSummary:
    ok: int = 0
    changed: int = 0
    failed: int = 0
    skipped: int = 0
    unreachable: bool = False
    reboot_required: bool = False
    rebooted: bool = False
    restart_required: list[int] = field(default_factory=list)
    round_trips: int = 0  # remote commands run for the host and its guests
    #: the guests of ``restart_required`` as the recap names them (``CT 200``, ``VM 110``); not in the JSON
    restart_guests: list[str] = field(default_factory=list)
    #: its plan was refused as unsafe for what the host runs (an exit-2 error before any task): not in the JSON
    refused: bool = False
    #: the state read at the end of its run (:attr:`RunOptions.snapshot`), None when not asked or not reached;
    #: not in the JSON
    snapshot: dict[str, str] | None = None

    def count(self, status: Status) -> None:
        setattr(self, status, getattr(self, status) + 1)

    def to_json(self) -> dict[str, Any]:
        out = {**self.__dict__, "restart_required": sorted(self.restart_required)}
        del out["restart_guests"]
        del out["refused"]
        del out["snapshot"]
        return out


@dataclass
class RunReport:
    playbook: str
    check: bool
    results: list[TaskResult] = field(default_factory=list)
    hosts: dict[str, HostSummary] = field(default_factory=dict)
    duration: float = 0.0
    #: the gpuhost version that ran, set by the command line (the runner does not import the package root)
    version: str = ""

    @property
    def failed(self) -> bool:
        return any(h.failed or h.unreachable for h in self.hosts.values())

    @property
    def exit_code(self) -> int:
        """0 ok; 2 when every host that failed was refused before any task ran (bad input for what the host runs:
        nothing changed); 1 otherwise."""
        if not self.failed:
            return 0
        bad = [h for h in self.hosts.values() if h.failed or h.unreachable]
        return 2 if all(h.refused and not h.unreachable for h in bad) else 1

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "gpuhost_version": self.version,
            "playbook": shown_path(self.playbook),
            "check": self.check,
            "ok": not self.failed,
            "exit_code": self.exit_code,
            "duration_s": round(self.duration, 4),
            "hosts": {name: s.to_json() for name, s in self.hosts.items()},
            "tasks": [r.to_json() for r in self.results],
        }
