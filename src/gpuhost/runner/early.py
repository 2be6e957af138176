"""A run's remembered reads sent to the user's keeper as soon as the inventory is read (``ssh.persist``), while
the rest of the program loads and plans.

Before a run reads a node it imports the roles and their libraries, loads the playbook, expands the roles and
checks their templates: the client's own work, a few hundred milliseconds for a launch. Over a kept connection a
read costs the client only a request, so the reads the last run of this playbook made on each node (its record,
:mod:`gpuhost.runner.remembered`) are sent to the keeper at once: one thread reads the records and sends them all
in one request, and the run takes a node's answer when it reaches the node, if it asks for exactly that command
(else the answer is dropped and the run reads as it would have). Only reads go early, only over a connection the
keeper already holds (none is opened here), and only to nodes with a record of this playbook and inventory that
``--limit`` keeps: a read of a node the run then does not reach changes nothing there.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from gpuhost.core.result import KeptAnswer
from gpuhost.errors import InventoryError
from gpuhost.runner import remembered

if TYPE_CHECKING:
    from gpuhost.inventory.loader import Inventory
    from gpuhost.inventory.models import NodeSpec

Reader = Callable[[str], KeptAnswer]


class _Sent:
    """One node's read sent early, and its answer once it came."""

    def __init__(self, node: NodeSpec, command: str) -> None:
        self.node, self.command = node, command
        self.answer: KeptAnswer = None
        self.came = threading.Event()
        self.sent_at = time.monotonic()

    def give(self, answer: KeptAnswer) -> None:
        self.answer = answer
        self.came.set()


class EarlyReads:
    """The reads sent early, by node, until the run takes them."""

    def __init__(self) -> None:
        self._sent: dict[str, _Sent] = {}
        self._records: dict[Path, remembered.Record] = {}  # the records read here, by path (:meth:`record`)
        self._lock = threading.Lock()
        self._decided = threading.Event()  # set once it is known which nodes were sent a read
        self._thread: threading.Thread | None = None

    def send(self, inventory: Inventory, playbook: Path, directory: Path, limit: str | None) -> None:
        """Send each persisting node's remembered read of ``playbook`` (records in ``directory``): one thread
        reads the records and sends them to the keeper in one request, while the run goes on."""
        self._thread = threading.Thread(
            target=self._send, args=(inventory, playbook, directory, limit), daemon=True, name="early reads"
        )
        self._thread.start()

    def _send(self, inventory: Inventory, playbook: Path, directory: Path, limit: str | None) -> None:
        from gpuhost.connection import persist
        from gpuhost.runner.connect import persists

        sent: list[_Sent] = []
        try:
            names = inventory.select(limit) if limit else list(inventory.nodes)
            record = remembered.records(directory, playbook, Path(inventory.path))
            for name in names:
                node = inventory.nodes[name]
                if not persists(node):
                    continue
                path = record(name)
                self._records[path] = loaded = remembered.load(path)
                command = remembered.command_of(loaded)
                if command is not None:
                    self._sent[name] = _Sent(node, command)
                    sent.append(self._sent[name])
        except InventoryError:
            pass  # the run says what is wrong with --limit
        finally:
            self._decided.set()
        try:
            persist.read_all([(s.node, s.command) for s in sent], lambda i, answer: sent[i].give(answer))
        finally:
            for s in sent:
                if not s.came.is_set():
                    s.give(None)

    def record(self, path: Path) -> remembered.Record | None:
        """The record at ``path`` as it was read here (once: the run reads it no second time); None when it was
        not."""
        if self._thread is not None:
            self._decided.wait()
        with self._lock:
            return self._records.pop(path, None)

    def reader(self, name: str, read: Reader | None) -> Reader | None:
        """``read`` (the node's kept reader), answering first the command sent early for ``name``, once."""
        if self._thread is not None:
            self._decided.wait()
        with self._lock:
            sent = self._sent.pop(name, None)
        if sent is None or read is None:
            return read

        def answer(command: str) -> KeptAnswer:
            nonlocal sent
            if sent is not None and command == sent.command:
                taken, sent = sent, None
                taken.came.wait()
                from gpuhost.runner.connect import log_kept_read

                log_kept_read(taken.node, command, taken.answer, taken.sent_at)
                return taken.answer  # None: the keeper could not answer it, the run reads over its own
            return read(command)

        return answer
