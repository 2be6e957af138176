"""Run inside an LXC container through its node: ``pct exec CTID -- sh -c …`` over the node's connection."""

from __future__ import annotations

import shlex

from gpuhost.connection.base import Connection
from gpuhost.core.result import CommandResult


class PctConnection(Connection):
    """Commands, reads and atomic writes inside container ``ctid``; stdin passes through."""

    def __init__(self, node: Connection, ctid: int) -> None:
        self.node = node
        self.ctid = ctid
        self.name = f"{node.name}/ct{ctid}"

    def _exec(self, command: str, stdin: bytes | None, timeout: float | None) -> CommandResult:
        wrapped = f"pct exec {self.ctid} -- sh -c {shlex.quote(command)}"
        result = self.node._exec(wrapped, stdin, timeout)
        return CommandResult(command, result.exit_code, result.stdout, result.stderr, result.duration)
