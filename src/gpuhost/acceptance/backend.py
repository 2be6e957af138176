"""testinfra backends that go through gpuhost's connections.

``gpuhost://NODE``
    the node itself, over the SSH connection its inventory entry describes (strict known_hosts);
``pct://NODE/CTID``
    inside container CTID of NODE: ``pct exec CTID -- sh -c …`` over that same connection;
``qm-guest://NODE/VMID``
    inside VM VMID of NODE, over SSH at the guest address and with the ``ssh`` settings of its inventory
    entry (``nodes.NODE.vms.VMID``), host keys checked as for nodes; the VM need not run a guest agent.

Nodes come from the gpuhost inventory given to :func:`use_inventory` (the pytest plugin does that
from ``--gpuhost-inventory``; plain testinfra users may set ``GPUHOST_INVENTORY``). One connection
per node (and per VM guest) is opened on first use and shared; :func:`close_all` closes them.

testinfra keeps only the network location of a host URL (``pct://pve1/200`` would reach it as
``pve1``), so importing this module wraps :func:`testinfra.backend.parse_hostspec` to keep the
path for these schemes, and registers the three schemes in ``testinfra.backend.BACKENDS``.
"""

from __future__ import annotations

import os
import threading
import urllib.parse
from typing import Any

import testinfra.backend
from testinfra.backend import base

from gpuhost.connection.base import Connection
from gpuhost.errors import UsageError
from gpuhost.inventory.loader import Inventory, load_inventory

SCHEMES = {
    "gpuhost": "gpuhost.acceptance.backend.NodeBackend",
    "pct": "gpuhost.acceptance.backend.PctBackend",
    "qm-guest": "gpuhost.acceptance.backend.QmGuestBackend",
}

_lock = threading.Lock()
_inventory: Inventory | None = None
_connections: dict[str, Connection] = {}
_closed_trips = 0  # remote commands run by connections closed since the last take_round_trips()


def use_inventory(inventory: Inventory | None) -> None:
    """The inventory hosts are looked up in (closing connections opened for another one)."""
    global _inventory
    close_all()
    _inventory = inventory


def inventory() -> Inventory:
    global _inventory
    if _inventory is None:
        path = os.environ.get("GPUHOST_INVENTORY")
        if not path:
            raise UsageError("gpuhost's testinfra backends need an inventory: --gpuhost-inventory INV")
        _inventory = load_inventory(path)
    return _inventory


def node_connection(name: str) -> Connection:
    """The shared, open connection to inventory node ``name``."""
    from gpuhost.runner.connect import open_connection

    with _lock:
        conn = _connections.get(name)
        if conn is None:
            inv = inventory()
            if name not in inv.nodes:
                raise UsageError(f"'{name}' is not a node of {inv.path}")
            conn = _connections[name] = open_connection(inv.nodes[name])
        return conn


def guest_connection(node: str, vmid: int) -> Connection:
    """The shared, open SSH connection into VM ``vmid`` of ``node`` (at its inventory ``address``)."""
    from gpuhost.runner.connect import open_vm_connection

    key = f"{node}/VM {vmid}"
    with _lock:
        conn = _connections.get(key)
        if conn is None:
            inv = inventory()
            vm = inv.nodes[node].vms.get(vmid) if node in inv.nodes else None
            if vm is None:
                raise UsageError(f"qm-guest://{node}/{vmid}: no VM {vmid} on node '{node}' in {inv.path}")
            if vm.address is None:
                raise UsageError(
                    f"qm-guest://{node}/{vmid}: VM {vmid} has no guest address (nodes.{node}.vms.{vmid}.address)"
                )
            conn = _connections[key] = open_vm_connection(key, vm)
        return conn


def close_all() -> None:
    global _closed_trips
    with _lock:
        for conn in _connections.values():
            _closed_trips += _trips(conn)
            conn.close()
        _connections.clear()


def take_round_trips() -> int:
    """Remote commands run over the shared connections (each one round trip): those closed since the last call,
    and those still open."""
    global _closed_trips
    with _lock:
        trips = _closed_trips + sum(_trips(c) for c in _connections.values())
        _closed_trips = 0
    return trips


def _trips(conn: Connection) -> int:
    """An SSH connection's session channels (its containers' ``pct exec`` included), else its commands."""
    opened = getattr(conn, "sessions_opened", None)
    return opened if isinstance(opened, int) else conn.commands_run


def _split(spec: str, scheme: str) -> tuple[str, int]:
    node, sep, guest = spec.partition("/")
    if not sep or not node or not guest.isdigit():
        raise UsageError(f"{scheme}://{spec}: expected {scheme}://NODE/ID (an inventory node and a numeric guest id)")
    return node, int(guest)


class _GpuhostBackend(base.BaseBackend):
    """Runs testinfra's commands through a gpuhost :class:`Connection`."""

    def connection(self) -> Connection:
        raise NotImplementedError

    def run(self, command: str, *args: str, **kwargs: Any) -> base.CommandResult:
        cmd = self.get_command(command, *args)
        r = self.connection().run(cmd, check=False)
        return self.result(r.exit_code, self.encode(cmd), r.stdout, r.stderr)


class NodeBackend(_GpuhostBackend):
    NAME = "gpuhost"

    def __init__(self, name: str, *args: Any, **kwargs: Any) -> None:
        self.node = name
        super().__init__(name, *args, **kwargs)

    def connection(self) -> Connection:
        return node_connection(self.node)


class PctBackend(_GpuhostBackend):
    NAME = "pct"

    def __init__(self, spec: str, *args: Any, **kwargs: Any) -> None:
        self.node, self.ctid = _split(spec, self.NAME)
        super().__init__(spec, *args, **kwargs)

    def connection(self) -> Connection:
        from gpuhost.connection.pct import PctConnection

        return PctConnection(node_connection(self.node), self.ctid)


class QmGuestBackend(_GpuhostBackend):
    """A VM guest over SSH at the address its inventory entry gives (``nodes.NODE.vms.VMID.address``)."""

    NAME = "qm-guest"

    def __init__(self, spec: str, *args: Any, **kwargs: Any) -> None:
        self.node, self.vmid = _split(spec, self.NAME)
        super().__init__(spec, *args, **kwargs)

    def connection(self) -> Connection:
        return guest_connection(self.node, self.vmid)


_original_parse = testinfra.backend.parse_hostspec


def parse_hostspec(hostspec: str) -> tuple[str, dict[str, Any]]:
    """testinfra's own, except that ``pct://NODE/CTID`` and ``qm-guest://NODE/VMID`` keep their id."""
    host, kw = _original_parse(hostspec)
    if kw.get("connection") in ("pct", "qm-guest"):
        path = urllib.parse.urlparse(hostspec).path
        host = host + path.rstrip("/")
    return host, kw


def register() -> None:
    testinfra.backend.BACKENDS.update(SCHEMES)
    testinfra.backend.parse_hostspec = parse_hostspec


register()
