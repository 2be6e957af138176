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

import logging
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

from gpuhost.connection.base import DEFAULT_TIMEOUT, Connection, Held, Stdin, iter_chunks, to_shell
from gpuhost.connection.paramiko_import import paramiko
from gpuhost.connection.watchdog import Watchdog
from gpuhost.core.result import TIMEOUT_EXIT, CommandResult
from gpuhost.errors import ConnectionFailed, HostKeyMismatch

HostKeyPolicy = Literal["strict", "accept-new"]

# paramiko's transport thread logs a closed socket ("Socket exception: Bad file descriptor") after a
# refused connection; gpuhost reports the failure itself, so its records must not reach stderr.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

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
        self._jump: SSHConnection | None = None
        self._connect()

    # -- session -------------------------------------------------------------------------
    def _connect(self) -> None:
        s = self.settings
        known_hosts = Path(s.known_hosts_file).expanduser()
        connect_kwargs: dict[str, object] = {
            "look_for_keys": s.look_for_keys,
            "allow_agent": s.allow_agent,
            "banner_timeout": s.connect_timeout,
            "auth_timeout": s.connect_timeout,
        }
        keys = [str(Path(s.key_file).expanduser())] if s.key_file else []
        for extra in s.key_files:  # IdentityFile lines: those that exist, as OpenSSH skips missing ones
            path = str(Path(extra).expanduser())
            if path not in keys and Path(path).exists():
                keys.append(path)
        if keys:
            connect_kwargs["key_filename"] = keys
        if s.password:
            connect_kwargs["password"] = s.password
        sock = self._open_socket()
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
        if s.become:
            self._check_become()

    def _check_become(self) -> None:
        check = self._exec("true", None, self.settings.connect_timeout * 3)
        if check.exit_code != 0:
            said = (check.stderr or check.stdout).strip().splitlines()
            self.close()
            raise ConnectionFailed(
                self.name,
                f"become: {self.settings.user} cannot run commands as root with sudo -n "
                f"({said[-1] if said else f'exit {check.exit_code}'}); give it passwordless sudo "
                f"(/etc/sudoers.d: {self.settings.user} ALL=(root) NOPASSWD: ALL) or connect as root",
            )

    def _open_socket(self) -> socket.socket | paramiko.Channel | paramiko.ProxyCommand:
        """The byte stream SSH runs over: a TCP socket (TCP_NODELAY), a ProxyCommand's pipes, or a
        ``direct-tcpip`` channel through the jump host."""
        s = self.settings
        if s.proxy_command:
            try:
                return paramiko.ProxyCommand(s.proxy_command)
            except (OSError, paramiko.SSHException) as exc:
                raise ConnectionFailed(self.name, f"ProxyCommand {s.proxy_command!r} did not start: {exc}") from None
        if s.jump is not None:
            if self._jump is None:
                try:
                    self._jump = SSHConnection(f"{self.name} (jump host {s.jump.address})", s.jump)
                except ConnectionFailed as exc:
                    raise ConnectionFailed(self.name, f"jump host {s.jump.address}: {exc}") from None
            try:
                return self._jump._transport().open_channel(
                    "direct-tcpip", (s.address, s.port), ("127.0.0.1", 0), timeout=s.connect_timeout
                )
            except (paramiko.SSHException, OSError, EOFError) as exc:
                self._jump.close()
                self._jump = None
                raise ConnectionFailed(
                    self.name, f"jump host {s.jump.address} could not reach {s.address}:{s.port}: {exc}"
                ) from None
        try:
            sock = socket.create_connection((s.address, s.port), timeout=s.connect_timeout)
        except OSError as exc:
            raise ConnectionFailed(self.name, f"{s.address}:{s.port}: {exc.strerror or exc}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

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
            _close_client(self._conn)
            self._conn = None
        if self._jump is not None:
            self._jump.close()
            self._jump = None

    # -- commands ------------------------------------------------------------------------
    def _exec(
        self, command: str, stdin: Stdin, timeout: float | None, stdout_sink: BinaryIO | None = None
    ) -> CommandResult:
        start = time.monotonic()
        transport = self._transport()
        s = self.settings
        wire = self._wire(command)
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
            chan.exec_command(wire)
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

    def _wire(self, command: str) -> str:
        """What goes over the channel: the command itself, or as root through ``sudo -n`` (``become``)."""
        if not self.settings.become:
            return command
        import shlex

        return "sudo -n -H -- sh -c " + shlex.quote(command)

    def hold(self, command: str | Sequence[str]) -> Held:
        transport = self._transport()
        s = self.settings
        try:
            chan = transport.open_session(timeout=s.keepalive * s.keepalive_count)
            chan.exec_command(self._wire(to_shell(command)))
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise ConnectionFailed(self.name, f"cannot open a channel: {exc}") from None
        self.commands_run += 1
        return _HeldChannel(self.name, chan)

    def _lost_if(self, watch: Watchdog, transport: paramiko.Transport) -> None:
        """A dead peer: drop the session, so later calls fail at once (reconnect() starts a new one)."""
        if watch.dead or not transport.is_active():
            transport.close()


class _HeldChannel(Held):
    def __init__(self, name: str, chan: paramiko.Channel) -> None:
        self.name = name
        self.chan = chan
        self._buf = b""

    def _read(self, timeout: float, until_newline: bool) -> bytes:
        deadline = time.monotonic() + timeout
        while not (until_newline and b"\n" in self._buf):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self.chan.settimeout(left)
            try:
                data = self.chan.recv(_CHUNK)
            except TimeoutError:
                break
            except (paramiko.SSHException, OSError, EOFError) as exc:
                raise ConnectionFailed(self.name, f"connection lost: {exc}") from None
            if not data:
                break
            self._buf += data
        if until_newline and b"\n" not in self._buf:
            return b""
        if until_newline:
            line, _, self._buf = self._buf.partition(b"\n")
            return line
        out, self._buf = self._buf, b""
        return out

    def read_until_line(self, timeout: float) -> str:
        return self._read(timeout, True).decode(errors="replace")

    def read_rest(self, timeout: float) -> str:
        return self._read(timeout, False).decode(errors="replace")

    def alive(self) -> bool:
        transport = self.chan.get_transport()
        return not self.chan.closed and not self.chan.exit_status_ready() and bool(transport and transport.is_active())

    def release(self) -> None:
        try:
            self.chan.shutdown_write()
        except (paramiko.SSHException, OSError, EOFError):
            pass
        self.chan.close()


def _close_client(client: paramiko.SSHClient) -> None:
    """Close the session and let its transport thread end now.

    paramiko's ``close`` leaves the transport thread in a ``recv`` with a 0.1 s timeout; the process
    then waits for that thread at exit (about 50 ms on average). Shutting the TCP socket down first wakes
    the ``recv`` at once (end of stream) and the thread is joined.
    """
    transport = client.get_transport()
    sock = getattr(transport, "sock", None)
    if isinstance(sock, socket.socket):
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    client.close()
    if transport is not None and transport is not threading.current_thread():
        transport.join(1.0)
