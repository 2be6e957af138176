"""Facts and read-only commands read in one round trip outside a run (``gpuhost verify``): the runner's batch
(:func:`gpuhost.runner.prefetch.batch_command`) over any connection."""

from __future__ import annotations

import io
from typing import Any

from gpuhost.connection.base import Connection
from gpuhost.core.result import CommandResult
from gpuhost.runner.prefetch import batch_command, parse_batch


def read_batch(conn: Connection, commands: list[str]) -> list[CommandResult]:
    """Read-only commands run at once in one round trip (:func:`gpuhost.runner.prefetch.batch_command`), each
    result as if run by itself; one the batch could not return is run on its own."""
    sink = io.BytesIO()
    result = conn.run(batch_command(commands), check=False, stdout_sink=sink)
    found = parse_batch(commands, sink.getvalue(), result.stderr.encode())
    return [r if r is not None else conn.run(c, check=False) for c, r in zip(commands, found, strict=True)]


def read_facts(conn: Connection, *keys: tuple[Any, ...]) -> list[Any]:
    """Facts ``(fact, *args)`` read in one round trip outside a run (:func:`read_batch`), parsed as
    :func:`gpuhost.runner.connect.read_fact` parses each."""
    results = read_batch(conn, [key[0].command(*key[1:]) for key in keys])
    return [key[0].parse(r, *key[1:]) for key, r in zip(keys, results, strict=True)]
