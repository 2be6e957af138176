"""SSH to a host: a paramiko client opens the session (no fabric, whose import costs ~0.3 s).

Host keys are verified against a known_hosts file by default and a mismatch is always
refused. ``accept-new`` records the key of a host seen for the first time (as OpenSSH's
``StrictHostKeyChecking=accept-new``). TCP_NODELAY is set on the socket: without it
every command pays ~40 ms of Nagle/delayed-ACK stall.

Every command has a timeout (``command_timeout``, 600 s, unless the call gives one), and a
:class:`~gpuhost.connection.watchdog.Watchdog` detects a dead peer: after ``keepalive`` s of
silence it sends an SSH keepalive that wants a reply, and ``keepalive_count`` unanswered ones
(a frozen or vanished host: TCP alone cannot tell, the kernel still ACKs) end the session
with :class:`~gpuhost.errors.ConnectionFailed`.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

import paramiko

from gpuhost.connection.base import DEFAULT_TIMEOUT, Connection, Stdin, iter_chunks
from gpuhost.connection.watchdog import Watchdog
from gpuhost.core.result import TIMEOUT_EXIT, CommandResult
from gpuhost.errors import ConnectionFailed, HostKeyMismatch

HostKeyPolicy = Literal["strict", "accept-new"]

_CHUNK = 65536


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


class _AcceptNewPolicy(paramiko.MissingHostKeyPolicy):
    """Trust a host's key on first sight and record it; paramiko still rejects mismatches."""

    def __init__(self, known_hosts: Path) -> None:
        self.known_hosts = known_hosts
        self._lock = threading.Lock()

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        with self._lock:
            self.known_hosts.parent.mkdir(parents=True, exist_ok=True)
            with self.known_hosts.open("a") as fh:
                fh.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
        client.get_host_keys().add(hostname, key.get_name(), key)


def _host_key_id(address: str, port: int) -> str:
    return address if port == 22 else f"[{address}]:{port}"


class SSHConnection(Connection):
    def __init__(self, name: str, settings: SSHSettings) -> None:
        self.name = name
        self.settings = settings
        self.default_timeout = settings.command_timeout
        self._conn: paramiko.SSHClient | None = None
        self._connect()

    # -- session -------------------------------------------------------------------------
    def _connect(self) -> None:
        s = self.settings
        known_hosts = Path(s.known_hosts_file).expanduser()
        connect_kwargs: dict[str, object] = {
            "look_for_keys": False,
            "allow_agent": False,
            "banner_timeout": s.connect_timeout,
            "auth_timeout": s.connect_timeout,
        }
        if s.key_file:
            connect_kwargs["key_filename"] = str(Path(s.key_file).expanduser())
        if s.password:
            connect_kwargs["password"] = s.password
        try:
            sock = socket.create_connection((s.address, s.port), timeout=s.connect_timeout)
        except OSError as exc:
            raise ConnectionFailed(self.name, f"{s.address}:{s.port}: {exc.strerror or exc}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connect_kwargs["sock"] = sock
        client = paramiko.SSHClient()
        client.get_host_keys().clear()
        if known_hosts.exists():
            client.load_host_keys(str(known_hosts))
        if s.host_key_policy == "accept-new":
            client.set_missing_host_key_policy(_AcceptNewPolicy(known_hosts))
        else:
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            client.connect(
                s.address,
                port=s.port,
                username=s.user,
                timeout=s.connect_timeout,
                **connect_kwargs,
            )
        except paramiko.BadHostKeyException as exc:
            sock.close()
            raise HostKeyMismatch(
                self.name,
                f"host key mismatch for {_host_key_id(s.address, s.port)}: it offered "
                f"{exc.key.get_name()} {exc.key.fingerprint}, {known_hosts} has {exc.expected_key.fingerprint}. "
                "This may be an attack, or the host was reinstalled; if you trust the new key, "
                f"remove the old one (ssh-keygen -f {known_hosts} -R '{_host_key_id(s.address, s.port)}') and "
                "connect again with host_key_policy: accept-new",
            ) from None
        except paramiko.SSHException as exc:
            sock.close()
            text = str(exc)
            if "not found in known_hosts" in text:
                text = (
                    f"host key of {_host_key_id(s.address, s.port)} is not in {known_hosts}; add it "
                    "(ssh-keyscan, or the lab's known_hosts file) or set host_key_policy: accept-new"
                )
            raise ConnectionFailed(self.name, text) from None
        except OSError as exc:
            sock.close()
            raise ConnectionFailed(self.name, str(exc)) from None
        self._conn = client

    def _transport(self) -> paramiko.Transport:
        transport = self._conn.get_transport() if self._conn else None
        if transport is None or not transport.is_active():
            raise ConnectionFailed(self.name, "the SSH session was closed (did the host reboot?)")
        return transport

    def reconnect(self, timeout: float = 300.0, interval: float = 1.0) -> None:
        """Drop the session and connect again, retrying until ``timeout`` (after a reboot)."""
        self.close()
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._connect()
                return
            except HostKeyMismatch:
                raise
            except ConnectionFailed:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(interval)

    def reboot(self, timeout: float) -> None:
        """Reboot the machine and come back connected once systemd finished starting it."""
        from gpuhost.connection.reboot import reboot_and_wait

        reboot_and_wait(self, timeout)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- commands ------------------------------------------------------------------------
    def _exec(
        self, command: str, stdin: Stdin, timeout: float | None, stdout_sink: BinaryIO | None = None
    ) -> CommandResult:
        start = time.monotonic()
        transport = self._transport()
        s = self.settings
        watch = Watchdog(transport, timeout, s.keepalive, s.keepalive_count)
        try:
            chan = transport.open_session(timeout=s.keepalive * s.keepalive_count)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            self._lost_if(watch, transport)
            raise ConnectionFailed(self.name, f"cannot open a channel: {exc}") from None
        watch.start(chan)
        err_chunks: list[bytes] = []

        def read_stderr() -> None:
            try:
                while data := chan.recv_stderr(_CHUNK):
                    watch.alive()
                    err_chunks.append(data)
            except (TimeoutError, OSError):
                pass

        out_chunks: list[bytes] = []
        failure: str | None = None
        code = -1
        try:
            chan.exec_command(command)
            reader = threading.Thread(target=read_stderr, daemon=True)
            reader.start()
            for chunk in iter_chunks(stdin):
                chan.sendall(chunk)
                watch.alive()
            chan.shutdown_write()
            while data := chan.recv(_CHUNK):
                watch.alive()
                if stdout_sink is not None:
                    stdout_sink.write(data)
                else:
                    out_chunks.append(data)
            reader.join()
            code = chan.recv_exit_status()
        except (paramiko.SSHException, OSError, EOFError) as exc:
            failure = str(exc) or type(exc).__name__
        finally:
            watch.stop()
            chan.close()
        if watch.dead:
            self._lost_if(watch, transport)
            raise ConnectionFailed(
                self.name,
                f"the host stopped answering (no reply to {s.keepalive_count} "
                f"keepalives {s.keepalive:g} s apart) while running: {command[:200]}",
            )
        stderr = b"".join(err_chunks).decode(errors="replace")
        stdout = b"".join(out_chunks).decode(errors="replace")
        if watch.timed_out:
            return CommandResult(
                command,
                TIMEOUT_EXIT,
                stdout,
                stderr + f"\ntimed out after {timeout:g} s",
                time.monotonic() - start,
                timed_out=True,
            )
        if failure is not None or code == -1:  # the session ended without an exit status (host went down)
            raise ConnectionFailed(self.name, f"connection lost while running a command: {failure or 'no exit status'}")
        return CommandResult(command, code, stdout, stderr, time.monotonic() - start)

    def _lost_if(self, watch: Watchdog, transport: paramiko.Transport) -> None:
        """A dead peer: drop the session, so later calls fail at once (reconnect() starts a new one)."""
        if watch.dead or not transport.is_active():
            transport.close()
