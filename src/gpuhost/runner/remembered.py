"""Reads remembered from a host's last run, read again in one batch before this run plans anything.

A converged run plans in rounds: the roles are expanded from the node's facts (one round trip), the tasks ask for
their facts (one batch), then for the facts that depend on those (one more), a container's among them. The reads
themselves are the same run after run. So each run records the commands of the facts it read before its first
change (the node's, and each container's it reached through ``pct exec``), and the next run of the same playbook
on the same inventory and host reads them all in one command when it connects, each container's nested in it.
The reads the last run made alone before its batches (the node's facts the roles are expanded from, which wait
for systemd to finish starting the node) run and finish first, then the others at once: the order the node saw
before. A fact whose command was read so is answered from that result; every other fact is read as before. A
change forgets them with every other fact, and reading a fact earlier within the same unchanged state is what
the batched read-ahead does already, so a remembered read changes no decision, only when it is made: the results
are always this run's, only the list of commands is kept. A command the next run no longer asks for costs a
little time in that one batch, and is not recorded again.

The record lives in ``$XDG_CACHE_HOME/gpuhost/readahead/`` (default ``~/.cache``), one file per playbook,
inventory and host, written atomically and readable by its owner only; a command that shows a secret is not
recorded. A missing or unreadable record means an ordinary run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuhost import usercache

if TYPE_CHECKING:
    from gpuhost.runner.context import RunnerHost

SCHEMA = "gpuhost.readahead/2"
#: a record listing more commands than this is not used (a record is a few dozen)
MAX_COMMANDS = 500


def cache_dir() -> Path:
    return usercache.folder("readahead")


def record_path(directory: Path, playbook: Path, inventory: Path, host: str) -> Path:
    """The record of one host's runs of one playbook on one inventory."""
    return records(directory, playbook, inventory)(host)


def records(directory: Path, playbook: Path, inventory: Path) -> Callable[[str], Path]:
    """:func:`record_path` for each host of one run (the paths resolved once, not once a host)."""
    prefix = "\0".join((str(playbook.resolve()), str(inventory.resolve()), ""))

    def path(host: str) -> Path:
        return directory / f"{hashlib.sha256((prefix + host).encode()).hexdigest()[:32]}.json"

    return path


@dataclass(frozen=True)
class Record:
    """The node's commands (``first``: those read alone before the batches, in order) and each container's."""

    node: list[str] = field(default_factory=list)
    first: list[str] = field(default_factory=list)
    lxc: dict[int, list[str]] = field(default_factory=dict)


def load(path: Path) -> Record:
    """The record at ``path``; an empty one when there is no usable record. Its commands run on the node as the
    inventory's user, so a record another user owns or could write (the file or its folder) is not used, as
    OpenSSH refuses such a config file."""
    if not usercache.trusted(path):
        return Record()
    try:
        doc = json.loads(path.read_text())
        node = [str(c) for c in doc["node"]]
        first = [str(c) for c in doc["first"] if c in node]
        lxc = {int(k): [str(c) for c in v] for k, v in doc["lxc"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return Record()
    if doc.get("schema") != SCHEMA or len(node) + sum(map(len, lxc.values())) > MAX_COMMANDS:
        return Record()
    return Record(node, first, lxc)


def save(path: Path, ctx: RunnerHost, last: Record | None = None) -> None:
    """What ``ctx`` (a node) and its containers read before the first change, as the next run's record (``last``:
    the record this run read, when it has it)."""
    from gpuhost.redact import redact

    asked = {ctid: guest.asked()[0] for ctid, guest in sorted(ctx.lxc_guests().items())}
    node, first = ctx.asked()
    previous = load(path) if last is None else last
    if Record(node, first, {k: v for k, v in asked.items() if v}) == previous:
        return  # the same record (a converged run reads what the last one did): nothing to write

    def keep(commands: list[str]) -> list[str]:
        return [c for c in commands if redact(c) == c]

    lxc = {str(ctid): keep(cmds) for ctid, cmds in asked.items()}
    node, first = keep(node), keep(first)
    if not node and not any(lxc.values()):
        return  # a run that read nothing (its tasks all filtered out) leaves the last record as it was
    doc: dict[str, Any] = {"schema": SCHEMA, "node": node, "first": first, "lxc": {k: v for k, v in lxc.items() if v}}
    if previous == Record(node, first, {int(k): v for k, v in doc["lxc"].items()}):
        return  # the same record once secret-bearing commands are left out
    usercache.write(path, json.dumps(doc).encode())


def batch_of(record: Record) -> tuple[list[str], list[tuple[int, list[str]]], list[str]]:
    """What :func:`read` sends for ``record``: the node's commands (those read alone last time first), each
    container's, and those first ones."""
    nested = [(ctid, cmds) for ctid, cmds in sorted(record.lxc.items()) if cmds]
    first = list(dict.fromkeys(record.first))
    return first + [c for c in record.node if c not in first], nested, first


def command_of(record: Record) -> str | None:
    """The one command :func:`read` sends for ``record`` (None: it sends none)."""
    from gpuhost.runner.prefetch import nested_batch

    own, nested, first = batch_of(record)
    return nested_batch(own, nested, len(first)) if own or nested else None


def read(ctx: RunnerHost, record: Record) -> None:
    """Read the remembered commands in one command on ``ctx`` (a node): its own (those read alone last time
    first, finished before the others start), and each container's nested through ``pct exec`` (a container
    that is not running answers none). The results answer the facts asked."""
    from gpuhost.core.guest import Guest
    from gpuhost.runner.prefetch import fetch_nested

    own, nested, first = batch_of(record)
    if not own and not nested:
        return
    found, inside = fetch_nested(ctx, own, nested, first=len(first))
    ctx.remember({c: r for c, r in zip(own, found, strict=True) if r is not None}, first)
    for (ctid, cmds), results in zip(nested, inside, strict=True):
        guest = ctx.guest(Guest.ct(ctid))
        guest.remember({c: r for c, r in zip(cmds, results, strict=True) if r is not None})
