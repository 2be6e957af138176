"""Everything an operation may know about the host it plans for."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from gpuhost.connection import open_connection
from gpuhost.connection.base import Connection
from gpuhost.connection.pct import PctConnection
from gpuhost.inventory.models import NodeSpec
from gpuhost.pve.api import PveApi
from gpuhost.templating import Templates

T = TypeVar("T")


class HostContext:
    """One host during one run: its connection (opened on first use), variables and fact cache."""

    def __init__(self, node: NodeSpec, variables: dict[str, Any], templates: Templates, *, check: bool,
                 allow_reboot: bool, allow_restart: bool = False,
                 connect: Callable[[NodeSpec], Connection] = open_connection) -> None:
        self.node = node
        self.name = node.name
        self.vars = variables
        self.templates = templates
        self.check = check
        self.allow_reboot = allow_reboot
        self.allow_restart = allow_restart
        self.restart_required: set[int] = set()
        self.reboot_required = False
        self.rebooted = False
        self._connect = connect
        self._conn: Connection | None = None
        self._facts: dict[tuple[Any, ...], Any] = {}
        self._guests: dict[int, HostContext] = {}
        self._pve: PveApi | None = None
        self.parent: HostContext | None = None

    @property
    def conn(self) -> Connection:
        if self._conn is None:
            self._conn = self._connect(self.node)
        return self._conn

    @property
    def pve(self) -> PveApi:
        """The node's Proxmox VE API (token route and root route, see :mod:`gpuhost.pve.api`)."""
        if self._pve is None:
            self._pve = PveApi(self.node, self.conn)
        return self._pve

    def fact(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(conn, *args)``, cached until the runner next changes this host."""
        key = (fn, *args)
        if key not in self._facts:
            self._facts[key] = fn(self.conn, *args)
        return self._facts[key]  # type: ignore[no-any-return]

    def invalidate_facts(self) -> None:
        self._facts.clear()
        for guest in self._guests.values():
            guest.invalidate_facts()
        if self.parent is not None:
            self.parent._facts.clear()

    def guest(self, ctid: int) -> HostContext:
        """The context of LXC container ``ctid`` on this node: same variables, its own facts."""
        if ctid not in self._guests:
            node = self.node.model_copy(update={"name": f"{self.name}/ct{ctid}"})
            guest = HostContext(node, self.vars, self.templates, check=self.check, allow_reboot=False,
                                connect=lambda _n: PctConnection(self.conn, ctid))
            guest.parent = self
            self._guests[ctid] = guest
        return self._guests[ctid]

    def template_vars(self) -> dict[str, Any]:
        return {**self.vars, "inventory_hostname": self.name, "node": self.node.model_dump()}

    def render_template(self, name: str) -> str:
        return self.templates.render_file(name, self.template_vars())

    def render_value(self, value: Any) -> Any:
        return self.templates.render_value(value, self.template_vars())

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
