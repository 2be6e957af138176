"""Connections: one protocol (:class:`Connection`), several transports.

The names below load on first use (PEP 562), so importing this package, or one of its
light modules, does not pull in Fabric and Paramiko.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuhost.connection.base import Connection, WriteResult
    from gpuhost.connection.local import LocalConnection
    from gpuhost.connection.result import CommandResult
    from gpuhost.connection.ssh import SSHConnection, SSHSettings
    from gpuhost.inventory.models import NodeSpec

_LAZY = {"Connection": "gpuhost.connection.base", "WriteResult": "gpuhost.connection.base",
         "LocalConnection": "gpuhost.connection.local", "CommandResult": "gpuhost.connection.result",
         "SSHConnection": "gpuhost.connection.ssh", "SSHSettings": "gpuhost.connection.ssh",
         "ConnectionFailed": "gpuhost.errors"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def ssh_settings(node: NodeSpec) -> SSHSettings:
    from gpuhost.connection.ssh import SSHSettings
    from gpuhost.inventory.secrets import read_secret

    s = node.ssh
    password = read_secret(f"{node.name}: ssh password", env=s.password_env, file=s.password_file)
    return SSHSettings(address=node.address, user=s.user, port=s.port, key_file=s.key_file, password=password,
                       known_hosts_file=s.known_hosts_file, host_key_policy=s.host_key_policy,
                       connect_timeout=s.connect_timeout)


def open_connection(node: NodeSpec) -> Connection:
    """A live connection to ``node`` as its inventory entry describes."""
    from gpuhost.errors import ConnectionFailed

    if node.connection == "local":
        from gpuhost.connection.local import LocalConnection

        return LocalConnection(node.name)
    if node.connection == "api":
        raise ConnectionFailed(
            node.name,
            "only an API token is configured (connection: api), and provisioning needs root over SSH: PVE lets "
            "only root@pam set device passthrough ('configuring device passthrough is only allowed for "
            "root@pam'), raw lxc.* keys have no API at all, and the kernel command line, modules and driver "
            "live outside PVE's API. Fix: give gpuhost SSH as root to this node (ssh: {user: root, key_file: …}"
            " and remove connection: api)")
    from gpuhost.connection.ssh import SSHConnection

    return SSHConnection(node.name, ssh_settings(node))


__all__ = ["CommandResult", "Connection", "LocalConnection", "SSHConnection", "SSHSettings", "WriteResult",
           "open_connection", "ssh_settings"]
