"""``~/.ssh/config`` as OpenSSH applies it, for the fields gpuhost uses.

For a node's address (which may be an alias of a ``Host`` block): ``HostName``, ``User``, ``Port``,
``IdentityFile``, ``ProxyJump`` (first hop; a chain ``a,b`` is refused with a message) and
``ProxyCommand`` (``%h``, ``%p``, ``%r`` expanded). A field written in the inventory wins over the
file; the file wins over gpuhost's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpuhost.errors import ConnectionFailed


@dataclass(frozen=True)
class SshOptions:
    hostname: str | None = None
    user: str | None = None
    port: int | None = None
    identity_files: tuple[str, ...] = ()
    proxy_jump: str | None = None
    proxy_command: str | None = None


def lookup(config_file: str | None, host: str, node: str) -> SshOptions:
    """The options ``config_file`` gives ``host``; an absent file gives none."""
    if not config_file or config_file == "none":
        return SshOptions()
    path = Path(config_file).expanduser()
    if not path.is_file():
        return SshOptions()
    from gpuhost.connection.paramiko_import import paramiko, with_match_exec

    try:
        cfg = paramiko.SSHConfig.from_path(str(path))
        found = with_match_exec(lambda: cfg.lookup(host))
    except (OSError, ValueError, paramiko.SSHException) as exc:
        raise ConnectionFailed(node, f"{path}: cannot read: {exc}") from None
    jump = found.get("proxyjump")
    if jump and jump.lower() != "none" and "," in jump:
        raise ConnectionFailed(
            node, f"{path}: ProxyJump {jump}: a chain of jump hosts is not supported; give one (or a ProxyCommand)"
        )
    command = found.get("proxycommand")
    port_text = found.get("port")
    try:
        port = int(port_text) if port_text else None
    except ValueError:
        raise ConnectionFailed(node, f"{path}: Port {port_text!r} for {host} is not a number") from None
    return SshOptions(
        hostname=found.get("hostname") if found.get("hostname") != host else None,
        user=found.get("user"),
        port=port,
        identity_files=tuple(found.get("identityfile", ())),
        proxy_jump=jump if jump and jump.lower() != "none" else None,
        proxy_command=command if command and command.lower() != "none" else None,
    )


def parse_jump(spec: str) -> tuple[str | None, str, int | None]:
    """``[user@]host[:port]`` (``ProxyJump``'s form, IPv6 in brackets) → user, host, port."""
    user, _, rest = spec.rpartition("@")
    host, port = rest, None
    if rest.startswith("["):
        host, _, tail = rest[1:].partition("]")
        if tail.startswith(":"):
            port = int(tail[1:])
    elif rest.count(":") == 1:
        host, _, p = rest.partition(":")
        port = int(p)
    return user or None, host, port
