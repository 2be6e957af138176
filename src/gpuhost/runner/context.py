"""The runner's :class:`~gpuhost.core.context.HostContext`: a live connection, variables and a fact cache."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from gpuhost.connection.base import Connection, Held
from gpuhost.core.facts import Fact
from gpuhost.core.guest import Guest
from gpuhost.core.result import CommandResult, KeptAnswer
from gpuhost.errors import FactError
from gpuhost.inventory.models import NodeSpec
from gpuhost.templating import Templates

if TYPE_CHECKING:
    from gpuhost.pve.api import PveApi

T = TypeVar("T")


class RunnerHost:
    """One host (a node, or a guest of one) during one run. Connects on first use."""

    #: the operator named this node in ``--reboot-serving``: it may reboot while it serves a model
    allow_reboot_serving: bool = False

    def __init__(
        self,
        node: NodeSpec,
        variables: Mapping[str, Any],
        templates: Templates,
        *,
        check: bool,
        connect: Callable[[NodeSpec], Connection],
        name: str | None = None,
        parent: RunnerHost | None = None,
        kept: Callable[[str], KeptAnswer] | None = None,
        lxc_id: int | None = None,
    ) -> None:
        self.node = node
        #: the node's kept connection (``ssh.persist``): reads go there until this run opens its own
        self._kept = kept
        #: a container of ``parent`` reached through ``pct exec`` over the parent's connection
        self.lxc_id = lxc_id
        self._name = name or node.name
        self._vars: Mapping[str, Any] = variables
        self.templates = templates
        self._check = check
        self._connect = connect
        self._conn: Connection | None = None
        self._facts: dict[tuple[Any, ...], Any] = {}
        self._raw: dict[tuple[Any, ...], CommandResult] = {}
        #: results of the commands the last run read, read again at this run's start (by command)
        self._remembered: dict[str, CommandResult] = {}
        #: the commands of the facts read before the first change (what the next run reads at its start)
        self._asked: dict[str, None] = {}
        self._asking = True
        #: those of them read alone before the batched reads began (the facts the roles are expanded from): the
        #: next run reads them first
        self._first: dict[str, None] = {}
        self._remembered_first: set[str] = set()
        self._batched = False
        self._guests: dict[Guest, RunnerHost] = {}
        self._pve: PveApi | None = None
        self.parent = parent
        # what the runner learnt in this run (set by the runner only)
        self.reboot_needed: str | None = None
        self.restarts_needed: set[Guest] = set()
        self.rebooted = False
        self._closed_trips = 0
        #: stdout of the commands the current task ran (kept in its result, shown with -v)
        self.command_output: list[str] = []
        #: and their stderr
        self.command_errors: list[str] = []
        #: what the waits of the current task ended with (its reason when it changed nothing else)
        self.waited: list[str] = []
        #: what PVE warned about during the task (a task ending ``WARNINGS: N``, pvesh's stderr)
        self.warnings: list[str] = []
        self._run_lock: Held | None = None

    # -- the HostContext protocol -------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def vars(self) -> Mapping[str, Any]:
        return self._vars

    @vars.setter
    def vars(self, value: Mapping[str, Any]) -> None:
        self._vars = value
        for guest in self._guests.values():
            guest.vars = value

    @property
    def check(self) -> bool:
        return self._check

    @property
    def reboot_pending(self) -> bool:
        root = self.parent or self
        return root.reboot_needed is not None

    def restart_pending(self, guest: Guest) -> bool:
        root = self.parent or self
        return guest in root.restarts_needed

    def fact(self, fact: Fact[T], *args: Any) -> T:
        if fact.live:
            return self.read(fact, *args)
        key = (fact, *args)
        if key not in self._facts:
            raw = self._raw.pop(key, None)
            command = raw.command if raw is not None else fact.command(*args)
            alone = False
            if raw is None:
                raw = self._remembered.get(command)
                alone = raw is not None and command in self._remembered_first
            if raw is None:
                alone = not self._batched
            result = raw if raw is not None else self.run_read(command)
            if self._asking:
                self._asked[command] = None
                if alone:
                    self._first[command] = None
            try:
                self._facts[key] = fact.parse(result, *args)
            except FactError as exc:
                raise FactError(f"{self.name}: {exc}") from None
        return self._facts[key]  # type: ignore[no-any-return]

    def read(self, fact: Fact[T], *args: Any) -> T:
        """The fact read now, whatever the cache holds (a wait's next look, a live state)."""
        result = self.run_read(fact.command(*args))
        try:
            return fact.parse(result, *args)
        except FactError as exc:
            raise FactError(f"{self.name}: {exc}") from None

    def kept_read(self, command: str) -> KeptAnswer:
        """A read-only command run over the node's kept connection (:mod:`gpuhost.connection.persist`) while this
        run has opened none of its own: its exit status, output and error output, or None (none answered)."""
        if self._kept is None or self._conn is not None:
            return None
        answer = self._kept(command)
        if answer is not None:
            self._closed_trips += 1
        return answer

    def _kept_inside(self, ctid: int) -> Callable[[str], KeptAnswer]:
        """A container's reads over the node's kept connection, through ``pct exec`` as its own connection sends
        them, while this run has opened no connection of its own to the node."""
        from gpuhost.connection.pct import pct_command

        def read(command: str) -> KeptAnswer:
            if self._kept is None or self._conn is not None:
                return None
            return self._kept(pct_command(ctid, command))

        return read

    def run_read(self, command: str) -> CommandResult:
        """A fact's command (read-only): over the kept connection when one answers, else this run's own."""
        answer = self.kept_read(command)
        if answer is not None:
            return CommandResult(command, answer[0], answer[1].decode(errors="replace"), answer[2])
        return self.conn.run(command, check=False)

    def has_fact(self, key: tuple[Any, ...]) -> bool:
        if key in self._facts or key in self._raw:
            return True
        return bool(self._remembered) and key[0].command(*key[1:]) in self._remembered

    def store_result(self, key: tuple[Any, ...], result: CommandResult) -> None:
        """A fact's command result read ahead (batched); parsed when the fact is asked for."""
        self._raw[key] = result
        if self._asking:
            self._asked[result.command] = None

    def begin_batches(self) -> None:
        """The batched reads of the tasks' facts begin: a fact read alone from now on was not one the roles were
        expanded from (:meth:`asked`)."""
        self._batched = True

    def remember(self, results: Mapping[str, CommandResult], first: Iterable[str] = ()) -> None:
        """Results of the commands the last run read (:mod:`gpuhost.runner.remembered`), read again just now: a
        fact whose command is among them is answered from them, until the first change. ``first``: those the
        last run read alone before its batches."""
        self._remembered.update(results)
        self._remembered_first.update(first)

    def asked(self) -> tuple[list[str], list[str]]:
        """The commands of the (not live) facts read before this run's first change, in the order first read,
        and those of them that were read alone before any batch (read first, and finished before the others)."""
        return list(self._asked), [c for c in self._asked if c in self._first]

    def lxc_guests(self) -> dict[int, RunnerHost]:
        """The containers of this node that this run reached (through ``pct exec``), by id."""
        return {g.id: ctx for g, ctx in self._guests.items() if g.kind == "lxc"}

    def guest(self, guest: Guest) -> RunnerHost:
        if guest not in self._guests:
            if guest.kind == "qemu":
                ctx = self._vm_guest(guest)
            else:
                from gpuhost.connection.pct import PctConnection

                ctx = RunnerHost(
                    self.node,
                    self.vars,
                    self.templates,
                    check=self.check,
                    connect=lambda _n: PctConnection(self.conn, guest.id),
                    name=f"{self.name}/ct{guest.id}",
                    parent=self,
                    kept=self._kept_inside(guest.id) if self._kept is not None else None,
                    lxc_id=guest.id,
                )
            self._guests[guest] = ctx
        return self._guests[guest]

    def _vm_guest(self, guest: Guest) -> RunnerHost:
        """A VM is its own machine: reached over SSH at the address its inventory entry gives."""
        spec = self.node.vms.get(guest.id)
        if spec is None or spec.address is None:
            raise FactError(
                f"{self.name}: {guest} has no guest address in the inventory (nodes.{self.node.name}.vms."
                f"{guest.id}.address): gpuhost reaches a VM's inside over SSH"
            )
        from gpuhost.runner.connect import open_vm_connection

        name = f"{self.name}/vm{guest.id}"
        return RunnerHost(
            self.node,
            self.vars,
            self.templates,
            check=self.check,
            connect=lambda _n: open_vm_connection(name, spec),
            name=name,
            parent=self,
        )

    def render_template(self, name: str, extra: Mapping[str, Any] | None = None) -> str:
        return self.templates.render_file(name, {**self.template_vars(), **(extra or {})})

    # -- the runner's side --------------------------------------------------------------------
    @property
    def conn(self) -> Connection:
        if self._conn is None:
            self._conn = self._connect(self.node)
        return self._conn

    @property
    def pve(self) -> PveApi:
        """The node's Proxmox VE API (token route and root route, see :mod:`gpuhost.pve.api`)."""
        if self._pve is None:
            from gpuhost.runner.connect import pve_api

            self._pve = pve_api(self.node, self.conn)
        return self._pve

    def template_vars(self) -> dict[str, Any]:
        return {**self.vars, "inventory_hostname": self.name, "node": self.node.model_dump()}

    def cached_facts(self) -> list[Any]:
        """The parsed facts read so far in this run (until the next change)."""
        return list(self._facts.values())

    def total_round_trips(self) -> int:
        """Remote commands run for this host and its guests (each one round trip)."""
        own = self._closed_trips + (self._conn.commands_run if self._conn is not None else 0)
        return own + sum(g.total_round_trips() for g in self._guests.values())

    def invalidate_facts(self) -> None:
        for ctx in (self, *self._guests.values(), *([self.parent] if self.parent else [])):
            ctx._facts.clear()
            ctx._raw.clear()
            ctx._remembered.clear()
            ctx._remembered_first.clear()
            ctx._asking = False

    def take_run_lock(self, wait: float) -> bool:
        """Hold the node's run lock (:mod:`gpuhost.runner.node_lock`) from now until :meth:`close`. True
        when it was taken just now (what was read before may predate another run's changes), False when
        this run already held it or the connection cannot hold one. Raises ``NodeBusy`` naming the holder."""
        if self.parent is not None:
            return self.parent.take_run_lock(wait)
        if self._run_lock is not None and self._run_lock.alive():
            return False
        from gpuhost.runner import node_lock

        grace = self.node.ssh.keepalive * self.node.ssh.keepalive_count
        self._run_lock = node_lock.take(self.name, self.conn.hold(node_lock.command(wait)), wait, grace)
        return self._run_lock is not None

    def drop_connection(self) -> None:
        """The machine behind this context restarted (a guest): reconnect on next use, read facts afresh."""
        self.close()
        self._facts.clear()
        self._raw.clear()
        self._remembered.clear()

    def close(self) -> None:
        for guest in self._guests.values():
            guest.close()
        if self._run_lock is not None:
            self._run_lock.release()
            self._run_lock = None
        if self._conn is not None:
            self._closed_trips += self._conn.commands_run
            self._conn.close()
            self._conn = None
