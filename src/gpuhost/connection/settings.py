"""How to reach a host over SSH: the settings a connection is opened with (no paramiko here, so a run can
compute them, and name a kept connection by them, without importing it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpuhost.connection.base import DEFAULT_TIMEOUT

HostKeyPolicy = Literal["strict", "accept-new"]

__all__ = ["HostKeyPolicy", "SSHSettings"]


@dataclass(frozen=True)
class SSHSettings:
    address: str
    user: str = "root"
    port: int = 22
    key_file: str | None = None
    password: str | None = None
    known_hosts_file: str = "~/.ssh/known_hosts"
    host_key_policy: HostKeyPolicy = "strict"
    connect_timeout: float = 10.0
    #: Seconds of silence before the peer is asked whether it is still there.
    keepalive: float = 15.0
    #: Unanswered keepalives (``keepalive`` s apart) after which the connection is declared lost.
    keepalive_count: int = 3
    #: Timeout of a command run without ``timeout=``.
    command_timeout: float | None = DEFAULT_TIMEOUT
    #: Further keys tried in order (IdentityFile lines of ~/.ssh/config)
    key_files: tuple[str, ...] = ()
    #: Keys of a running ssh-agent are offered
    allow_agent: bool = False
    #: ~/.ssh/id_* are tried when no key is given (OpenSSH's default keys)
    look_for_keys: bool = False
    #: A shell command whose stdin/stdout is the connection (OpenSSH's ProxyCommand)
    proxy_command: str | None = None
    #: A bastion the connection is tunnelled through (OpenSSH's ProxyJump)
    jump: SSHSettings | None = None
    #: Every command runs as root through ``sudo -n`` (the user needs passwordless sudo)
    become: bool = False
