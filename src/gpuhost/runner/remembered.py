"""Reads remembered from a host's last run, read again in one batch before this run plans anything.

A converged run plans in rounds: the roles are expanded from the node's facts (one round trip), the tasks ask for
their facts (one batch), then for the facts that depend on those (one more), a container's among them. The reads
themselves are the same run after run. So each run records the commands of the facts it read before its first
change (the node's, and each container's it reached through ``pct exec``), and the next run of the same playbook
on the same inventory and host reads them all in one command when it connects: the node's, each container's
nested in it, after systemd finished starting the node when one of them waits for that (as the host facts do).
A fact whose command was read so is answered from that result; every other fact is read as before. A change
forgets them with every other fact, and reading a fact earlier within the same unchanged state is what the
batched read-ahead does already, so a remembered read changes no decision, only when it is made: the results are
always this run's, only the list of commands is kept. A command the next run no longer asks for costs a little
time in that one batch, and is not recorded again.

The record lives in ``$XDG_CACHE_HOME/gpuhost/readahead/`` (default ``~/.cache``), one file per playbook,
inventory and host, written atomically and readable by its owner only; a command that shows a secret is not
recorded. A missing or unreadable record means an ordinary run.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuhost.facts.systemd import AFTER_BOOT

if TYPE_CHECKING:
    from gpuhost.runner.context import RunnerHost

SCHEMA = "gpuhost.readahead/1"
#: a record listing more commands than this is not used (a record is a few dozen)
MAX_COMMANDS = 500


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpuhost" / "readahead"


def record_path(directory: Path, playbook: Path, inventory: Path, host: str) -> Path:
    """The record of one host's runs of one playbook on one inventory."""
    key = "\0".join((str(playbook.resolve()), str(inventory.resolve()), host))
    return directory / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"


def load(path: Path) -> tuple[list[str], dict[int, list[str]]]:
    """The node's commands and each container's; nothing when there is no usable record."""
    try:
        doc = json.loads(path.read_text())
        node = [str(c) for c in doc["node"]]
        lxc = {int(k): [str(c) for c in v] for k, v in doc["lxc"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return [], {}
    if doc.get("schema") != SCHEMA or len(node) + sum(map(len, lxc.values())) > MAX_COMMANDS:
        return [], {}
    return node, lxc


def save(path: Path, ctx: RunnerHost) -> None:
    """What ``ctx`` (a node) and its containers read before the first change, as the next run's record."""
    from gpuhost.redact import redact

    def keep(commands: list[str]) -> list[str]:
        return [c for c in commands if redact(c) == c]

    lxc = {str(ctid): keep(guest.asked()) for ctid, guest in sorted(ctx.lxc_guests().items())}
    doc: dict[str, Any] = {"schema": SCHEMA, "node": keep(ctx.asked()), "lxc": {k: v for k, v in lxc.items() if v}}
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".readahead-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(doc, fh)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read(ctx: RunnerHost, node: list[str], lxc: dict[int, list[str]]) -> None:
    """Read the remembered commands in one command on ``ctx`` (a node): its own, and each container's nested
    through ``pct exec`` (a container that is not running answers none). The results answer the facts asked."""
    from gpuhost.core.guest import Guest
    from gpuhost.runner.prefetch import fetch_nested

    nested = [(ctid, cmds) for ctid, cmds in sorted(lxc.items()) if cmds]
    if not node and not nested:
        return
    # a read that waits for the node's boot to finish (the host facts) waits before the others start, as when it
    # was read alone before them; a playbook without one starts at once
    wait = AFTER_BOOT if any(AFTER_BOOT in c for c in node) else ""
    found, inside = fetch_nested(ctx, node, nested, first=wait)
    ctx.remember({c: r for c, r in zip(node, found, strict=True) if r is not None})
    for (ctid, cmds), results in zip(nested, inside, strict=True):
        guest = ctx.guest(Guest.ct(ctid))
        guest.remember({c: r for c, r in zip(cmds, results, strict=True) if r is not None})
