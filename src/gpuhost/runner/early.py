"""A run's remembered reads sent to the user's keeper as soon as the inventory is read (``ssh.persist``), while
the rest of the program loads and plans.

Before a run reads a node it imports the roles and their libraries, loads the playbook, expands the roles and
checks their templates: the client's own work, a few hundred milliseconds for a launch. Over a kept connection a
read costs the client only a request, so the reads the last run of this playbook made on each node (its record,
:mod:`gpuhost.runner.remembered`) are sent to the keeper at once, one thread per node, and the run takes the
answer when it reaches the node, if it asks for exactly that command (else the answer is dropped and the run
reads as it would have). Only reads go early, only over a connection the keeper already holds (none is opened
here), and only to nodes with a record of this playbook and inventory that ``--limit`` keeps: a read of a node
the run then does not reach changes nothing there.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from gpuhost.errors import InventoryError
from gpuhost.runner import remembered

if TYPE_CHECKING:
    from gpuhost.inventory.loader import Inventory

#: a read over a kept connection: exit status, output, error output; None when the keeper could not answer
Answer = tuple[int, bytes, str] | None
Reader = Callable[[str], Answer]


class _Sent:
    def __init__(self, command: str, read: Reader) -> None:
        self.command = command
        self.answer: Answer = None
        self.thread = threading.Thread(target=self._ask, args=(read,), daemon=True)
        self.thread.start()

    def _ask(self, read: Reader) -> None:
        self.answer = read(self.command)


class EarlyReads:
    """The reads sent early, by node, until the run takes them."""

    def __init__(self) -> None:
        self._sent: dict[str, _Sent] = {}
        self._lock = threading.Lock()

    def send(self, inventory: Inventory, playbook: Path, directory: Path, limit: str | None) -> None:
        """Send each persisting node's remembered read of ``playbook`` (records in ``directory``)."""
        from gpuhost.runner.connect import kept_reader

        try:
            names = inventory.select(limit) if limit else list(inventory.nodes)
        except InventoryError:
            return  # the run says what is wrong with --limit
        record = remembered.records(directory, playbook, Path(inventory.path))
        for name in names:
            node = inventory.nodes[name]
            read = kept_reader(node)
            if read is None:
                continue
            command = remembered.command_of(remembered.load(record(name)))
            if command is not None:
                self._sent[name] = _Sent(command, read)

    def reader(self, name: str, read: Reader | None) -> Reader | None:
        """``read`` (the node's kept reader), answering first the command sent early for ``name``, once."""
        with self._lock:
            sent = self._sent.pop(name, None)
        if sent is None or read is None:
            return read

        def answer(command: str) -> Answer:
            nonlocal sent
            if sent is not None and command == sent.command:
                taken, sent = sent, None
                taken.thread.join()
                return taken.answer  # None: the keeper could not answer it, the run reads over its own
            return read(command)

        return answer
