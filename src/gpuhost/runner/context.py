"""The runner's :class:`~gpuhost.core.context.HostContext`: a live connection, variables and a fact cache."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from gpuhost.connection.base import Connection
from gpuhost.core.facts import Fact
from gpuhost.core.guest import Guest
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
    ) -> None:
        self.node = node
        self._name = name or node.name
        self._vars: Mapping[str, Any] = variables
        self.templates = templates
        self._check = check
        self._connect = connect
        self._conn: Connection | None = None
        self._facts: dict[tuple[Any, ...], Any] = {}
        self._guests: dict[Guest, RunnerHost] = {}
        self._pve: PveApi | None = None
        self.parent = parent
        # what the runner learnt in this run (set by the runner only)
        self.reboot_needed: str | None = None
        self.restarts_needed: set[Guest] = set()
        self.rebooted = False
        self.round_trips = 0
        #: stdout of the commands the current task ran (kept in its result, shown with -v)
        self.command_output: list[str] = []

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
        key = (fact, *args)
        if key not in self._facts:
            command = fact.command(*args)
            result = self.conn.run(command, check=False)
            self.round_trips += 1
            try:
                self._facts[key] = fact.parse(result, *args)
            except FactError as exc:
                raise FactError(f"{self.name}: {exc}") from None
        return self._facts[key]  # type: ignore[no-any-return]

    def guest(self, guest: Guest) -> RunnerHost:
        if guest not in self._guests:
            if guest.kind != "lxc":
                raise FactError(f"{self.name}: {guest} cannot be reached yet (only LXC guests are)")
            from gpuhost.connection.pct import PctConnection

            ctx = RunnerHost(
                self.node,
                self.vars,
                self.templates,
                check=self.check,
                connect=lambda _n: PctConnection(self.conn, guest.id),
                name=f"{self.name}/ct{guest.id}",
                parent=self,
            )
            self._guests[guest] = ctx
        return self._guests[guest]

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

    def total_round_trips(self) -> int:
        return self.round_trips + sum(g.total_round_trips() for g in self._guests.values())

    def invalidate_facts(self) -> None:
        self._facts.clear()
        for guest in self._guests.values():
            guest._facts.clear()
        if self.parent is not None:
            self.parent._facts.clear()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
