"""testinfra backends that go through gpuhost's connections.

``gpuhost://NODE``
    the node itself, over the SSH connection its inventory entry describes (strict known_hosts);
``pct://NODE/CTID``
    inside container CTID of NODE: ``pct exec CTID -- sh -c …`` over that same connection;
``qm-guest://NODE/VMID``
    inside VM VMID of NODE, over SSH at the guest address and with the ``ssh`` settings of its inventory
    entry (``nodes.NODE.vms.VMID``), host keys checked as for nodes; the VM need not run a guest agent.

Nodes come from the gpuhost inventory given to :func:`gpuhost.acceptance.connections.use_inventory` (the
pytest plugin does that from ``--gpuhost-inventory``; plain testinfra users may set ``GPUHOST_INVENTORY``).
The backends share the suite's connections (:mod:`gpuhost.acceptance.connections`), one per node and VM guest.

testinfra keeps only the network location of a host URL (``pct://pve1/200`` would reach it as
``pve1``), so importing this module wraps :func:`testinfra.backend.parse_hostspec` to keep the
path for these schemes, and registers the three schemes in ``testinfra.backend.BACKENDS``.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

import testinfra.backend
from testinfra.backend import base

from gpuhost.acceptance.connections import guest_connection, node_connection
from gpuhost.connection.base import Connection
from gpuhost.errors import UsageError

SCHEMES = {
    "gpuhost": "gpuhost.acceptance.backend.NodeBackend",
    "pct": "gpuhost.acceptance.backend.PctBackend",
    "qm-guest": "gpuhost.acceptance.backend.QmGuestBackend",
}


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
