"""Connections: one protocol (:class:`Connection`), several transports."""

from __future__ import annotations

from gpuhost.connection.base import Connection, WriteResult
from gpuhost.connection.local import LocalConnection
from gpuhost.connection.pct import PctConnection
from gpuhost.connection.result import CommandResult
from gpuhost.connection.ssh import SSHConnection, SSHSettings
from gpuhost.errors import ConnectionFailed
from gpuhost.inventory.models import NodeSpec
from gpuhost.inventory.secrets import read_secret


def ssh_settings(node: NodeSpec) -> SSHSettings:
    s = node.ssh
    password = read_secret(f"{node.name}: ssh password", env=s.password_env, file=s.password_file)
    return SSHSettings(address=node.address, user=s.user, port=s.port, key_file=s.key_file, password=password,
                       known_hosts_file=s.known_hosts_file, host_key_policy=s.host_key_policy,
                       connect_timeout=s.connect_timeout)


def open_connection(node: NodeSpec) -> Connection:
    """A live connection to ``node`` as its inventory entry describes."""
    if node.connection == "local":
        return LocalConnection(node.name)
    if node.connection == "api":
        raise ConnectionFailed(
            node.name,
            "only an API token is configured (connection: api), and provisioning needs root over SSH: PVE lets "
            "only root@pam set device passthrough ('configuring device passthrough is only allowed for "
            "root@pam'), raw lxc.* keys have no API at all, and the kernel command line, modules and driver "
            "live outside PVE's API. Fix: give gpuhost SSH as root to this node (ssh: {user: root, key_file: …}"
            " and remove connection: api)")
    return SSHConnection(node.name, ssh_settings(node))


__all__ = ["CommandResult", "Connection", "LocalConnection", "PctConnection", "SSHConnection", "SSHSettings",
           "WriteResult", "open_connection", "ssh_settings"]
