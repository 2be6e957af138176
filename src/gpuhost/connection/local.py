"""Run on the controller itself."""

from __future__ import annotations

import subprocess
import time

from gpuhost.connection.base import Connection
from gpuhost.core.result import CommandResult


class LocalConnection(Connection):
    def __init__(self, name: str = "localhost") -> None:
        self.name = name

    def _exec(self, command: str, stdin: bytes | None, timeout: float | None) -> CommandResult:
        start = time.monotonic()
        try:
            proc = subprocess.run(["/bin/sh", "-c", command], input=stdin if stdin is not None else b"",
                                  capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            out = (exc.stdout or b"").decode(errors="replace")
            err = (exc.stderr or b"").decode(errors="replace") + f"\ntimed out after {timeout} s"
            return CommandResult(command, 124, out, err, time.monotonic() - start)
        return CommandResult(command, proc.returncode, proc.stdout.decode(errors="replace"),
                             proc.stderr.decode(errors="replace"), time.monotonic() - start)
