"""Handlers notified but not yet run, recorded on the node itself (``/var/lib/gpuhost/handlers-pending.json``),
so that a run killed between a change and its handler runs that handler on the next attempt.

Only the runner writes it, never in check mode. Targets reached with ``connection: local`` (the machine
gpuhost runs on) keep the list in memory only: several inventory names may be that one machine.
"""

from __future__ import annotations

import json
from typing import Any

from gpuhost.facts.boot import STATE_DIR
from gpuhost.runner.context import RunnerHost

PENDING_FILE = f"{STATE_DIR}/handlers-pending.json"


class PendingHandlers:
    def __init__(self, ctx: RunnerHost, handler_names: set[str]) -> None:
        self.ctx = ctx
        self.mine = handler_names
        self.enabled = not ctx.check and ctx.node.connection != "local"
        self._others: list[str] = []
        self._saved: list[str] = []

    def reads(self) -> list[tuple[Any, ...]]:
        """The fact keys :meth:`load` will ask for (read ahead in the same batch as the tasks' facts)."""
        from gpuhost.facts import files

        return [(files.content, PENDING_FILE)] if self.enabled and self.mine else []

    def load(self) -> set[str]:
        """The names of this play's handlers left pending by an earlier run (a play without handlers has none:
        the record is not read, and :meth:`save` leaves it as it is)."""
        if not self.enabled or not self.mine:
            return set()
        from gpuhost.facts import files

        text = self.ctx.fact(files.content, PENDING_FILE)  # read ahead with the tasks' facts (prefetch)
        try:
            names = [str(n) for n in json.loads(text or "[]")]
        except (ValueError, TypeError):
            names = []  # a damaged record: the operations decide from the node anyway
        self._saved = sorted(set(names))
        self._others = [n for n in self._saved if n not in self.mine]
        return {n for n in names if n in self.mine}

    def save(self, notified: set[str]) -> None:
        if not self.enabled:
            return
        names = sorted(set(self._others) | (notified & self.mine))
        if names == self._saved:
            return
        self.ctx.conn.run(["mkdir", "-p", STATE_DIR])
        self.ctx.conn.write_file(PENDING_FILE, json.dumps(names) + "\n", mode=0o644, backup=False)
        self._saved = names
