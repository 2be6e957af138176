"""The acceptance suite's connections: one per inventory node (and per VM guest), opened on first use and
shared by every proof (and by the testinfra backends of :mod:`gpuhost.acceptance.backend`).

The inventory comes from :func:`use_inventory` (the pytest plugin and ``gpuhost verify`` set it; plain testinfra
users may set ``GPUHOST_INVENTORY``); :func:`close_all` closes them; :func:`take_round_trips` counts the remote
commands they ran.
"""

from __future__ import annotations

import os
import threading

from gpuhost.connection.base import Connection
from gpuhost.errors import UsageError
from gpuhost.inventory.loader import Inventory, load_inventory

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
