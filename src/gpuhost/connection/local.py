"""Run on the controller itself."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from typing import BinaryIO

from gpuhost.connection.base import Connection, Stdin, iter_chunks
from gpuhost.connection.payload import CHUNK
from gpuhost.core.result import TIMEOUT_EXIT, CommandResult


class LocalConnection(Connection):
    def __init__(self, name: str = "localhost", *, default_timeout: float | None = None) -> None:
        self.name = name
        if default_timeout is not None:
            self.default_timeout = default_timeout

    def _exec(
        self, command: str, stdin: Stdin, timeout: float | None, stdout_sink: BinaryIO | None = None
    ) -> CommandResult:
        start = time.monotonic()
        proc = subprocess.Popen(
            ["/bin/sh", "-c", command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        out: list[bytes] = []
        err: list[bytes] = []

        def feed() -> None:
            try:
                for chunk in iter_chunks(stdin):
                    proc.stdin.write(chunk)  # type: ignore[union-attr]
            except (BrokenPipeError, OSError, ValueError):
                pass
            finally:
                try:
                    proc.stdin.close()  # type: ignore[union-attr]
                except OSError:
                    pass

        def drain(stream: BinaryIO, into: list[bytes], sink: BinaryIO | None) -> None:
            while chunk := stream.read1(CHUNK) if hasattr(stream, "read1") else stream.read(CHUNK):
                if sink is not None:
                    sink.write(chunk)
                else:
                    into.append(chunk)

        threads = [
            threading.Thread(target=feed, daemon=True),
            threading.Thread(target=drain, args=(proc.stdout, out, stdout_sink), daemon=True),
            threading.Thread(target=drain, args=(proc.stderr, err, None), daemon=True),
        ]
        for t in threads:
            t.start()
        timed_out = False
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            code = TIMEOUT_EXIT
        for t in threads[1:]:
            t.join(5)
        stderr = b"".join(err).decode(errors="replace")
        if timed_out:
            stderr += f"\ntimed out after {timeout:g} s"
        return CommandResult(
            command, code, b"".join(out).decode(errors="replace"), stderr, time.monotonic() - start, timed_out=timed_out
        )
