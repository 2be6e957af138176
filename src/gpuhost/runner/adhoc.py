"""Ad-hoc commands (``gpuhost shell``): one shell command on many nodes, or in a container on each,
in parallel (``forks`` at once), one connection per node, each host's result as it finishes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from gpuhost.connection.base import Connection
from gpuhost.errors import ConnectionFailed, GpuhostError
from gpuhost.inventory.key_files import check_key_files
from gpuhost.inventory.loader import Inventory
from gpuhost.inventory.models import NodeSpec
from gpuhost.runner.connect import open_connection


@dataclass(frozen=True)
class AdhocResult:
    host: str
    exit_code: int | None  # None: the command did not run (see ``error``)
    stdout: str
    stderr: str
    duration: float
    error: str | None = None
    unreachable: bool = False
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None and self.exit_code == 0

    def to_json(self) -> dict[str, object]:
        from gpuhost.redact import redact

        return {
            "host": self.host,
            "exit_code": self.exit_code,
            "stdout": redact(self.stdout),
            "stderr": redact(self.stderr),
            "duration_s": round(self.duration, 4),
            "error": redact(self.error) if self.error else None,
            "unreachable": self.unreachable,
            "timed_out": self.timed_out,
        }


def _one(
    node: NodeSpec, command: str, ctid: int | None, timeout: float | None, connect: Callable[[NodeSpec], Connection]
) -> AdhocResult:
    start = time.monotonic()
    try:
        with connect(node) as conn:
            target: Connection = conn
            if ctid is not None:
                from gpuhost.connection.pct import PctConnection

                target = PctConnection(conn, ctid)
            r = target.run(command, check=False, timeout=timeout)
    except ConnectionFailed as exc:
        return AdhocResult(node.name, None, "", "", time.monotonic() - start, str(exc), unreachable=True)
    except GpuhostError as exc:
        return AdhocResult(node.name, None, "", "", time.monotonic() - start, str(exc))
    error = f"timed out after {timeout:g} s" if r.timed_out and timeout else None
    return AdhocResult(
        node.name, r.exit_code, r.stdout, r.stderr, time.monotonic() - start, error, timed_out=r.timed_out
    )


def run_adhoc(
    inventory: Inventory,
    hosts: list[str],
    command: str,
    *,
    ctid: int | None = None,
    forks: int = 10,
    timeout: float | None = None,
    on_result: Callable[[AdhocResult], None] | None = None,
    connect: Callable[[NodeSpec], Connection] = open_connection,
) -> list[AdhocResult]:
    """Run ``command`` on each of ``hosts``; results in inventory order (``on_result`` sees them as they end)."""
    if connect is open_connection:  # their keys, before any connection (exit 2 with the inventory's line)
        check_key_files(inventory, hosts)
    lock = threading.Lock()

    def work(name: str) -> AdhocResult:
        result = _one(inventory.nodes[name], command, ctid, timeout, connect)
        if on_result is not None:
            with lock:
                on_result(result)
        return result

    with ThreadPoolExecutor(max_workers=max(1, forks)) as pool:
        return list(pool.map(work, hosts))
