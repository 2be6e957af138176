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
import os
import socket
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from gpuhost.connection import remote_kill
from gpuhost.connection.base import Connection, Held, Stdin, iter_chunks, to_shell
from gpuhost.connection.paramiko_import import paramiko
from gpuhost.connection.settings import SSHSettings

__all__ = ["SSHConnection", "SSHSettings"]
from gpuhost.connection.watchdog import Watchdog
from gpuhost.core.result import TIMEOUT_EXIT, CommandResult
from gpuhost.errors import ConnectionFailed, HostKeyMismatch

# paramiko's transport thread logs a closed socket ("Socket exception: Bad file descriptor") after a
# refused connection; gpuhost reports the failure itself, so its records must not reach stderr.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

_CHUNK = 65536


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


#: the keys paramiko looks for under ~/.ssh when ``look_for_keys`` is on (paramiko/client.py, ``SSHClient._auth``)
DEFAULT_KEYS = ("id_rsa", "id_ecdsa", "id_ed25519")


def auth_hint(s: SSHSettings, keys: list[str]) -> str:
    """What was offered to the server as ``s.user``, and the three ways to offer the right key."""
    tried = list(keys)
    if s.look_for_keys:
        tried += [str(p) for k in DEFAULT_KEYS if (p := Path("~/.ssh", k).expanduser()).exists()]
    offered = f"key files tried: {', '.join(tried)}" if tried else "no key file was found to try"
    if not s.allow_agent:
        agent = "ssh-agent not used (ssh.use_agent: false)"
    elif os.environ.get("SSH_AUTH_SOCK"):
        agent = "ssh-agent asked (SSH_AUTH_SOCK)"
    else:
        agent = "no ssh-agent running (SSH_AUTH_SOCK is not set)"
    return (
        f"logging in as {s.user}: {offered}; {agent}. Fix: name the key in the inventory (ssh.key_file), "
        f"load it into ssh-agent (ssh-add KEY), or give the host an IdentityFile in ~/.ssh/config"
    )


def _host_key_id(address: str, port: int) -> str:
    return address if port == 22 else f"[{address}]:{port}"


class SSHConnection(Connection):
    #: session channels opened for commands (each one round trip), those run for a container through
    #: ``pct exec`` over this connection included (:attr:`commands_run` counts only the node's own)
    sessions_opened: int = 0

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
        revoked: set[tuple[str, str]] = set()
        if known_hosts.exists():
            revoked = _load_known_hosts(client, known_hosts, self.name)
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
            elif isinstance(exc, paramiko.AuthenticationException) or "No authentication methods" in text:
                text = f"{text.rstrip('.')}: {auth_hint(s, keys)}"
            raise ConnectionFailed(self.name, text) from None
        except (OSError, EOFError) as exc:  # EOFError: the peer hung up mid-handshake (paramiko raises it as is)
            sock.close()
            said = str(exc) or "the host closed the connection during the handshake"
            raise ConnectionFailed(self.name, said) from None
        offered = client.get_transport().get_remote_server_key() if client.get_transport() else None
        if offered is not None and (offered.get_name(), offered.get_base64()) in revoked:
            _close_client(client)
            raise HostKeyMismatch(
                self.name,
                f"the host offered {offered.get_name()} {offered.get_fingerprint().hex()}, a key {known_hosts} marks "
                "@revoked: refused (OpenSSH refuses it too). Give the host a new key and add that one",
            )
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

    def is_open(self) -> bool:
        """The session is still up (as far as this end knows: a vanished peer shows on the next command)."""
        transport = self._conn.get_transport() if self._conn else None
        return bool(transport and transport.is_active())

    def answers(self, within: float) -> bool:
        """The peer answers a keepalive (``keepalive@openssh.com`` with want-reply) within ``within`` seconds: a
        connection that sat idle is still there (a vanished peer leaves TCP open, unnoticed, for minutes)."""
        transport = self._conn.get_transport() if self._conn else None
        if transport is None or not transport.is_active():
            return False
        done = threading.Event()

        def probe() -> None:
            try:  # returns when the reply (success or failure) arrives, or when the transport closes
                transport.global_request("keepalive@openssh.com", wait=True)
            except (paramiko.SSHException, OSError, EOFError):
                pass
            finally:
                done.set()

        threading.Thread(target=probe, name="gpuhost-ssh-answers", daemon=True).start()
        return done.wait(within) and transport.is_active()

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

    def reboot(self, timeout: float, record: tuple[str, str] | None = None) -> None:
        """Reboot the machine (writing ``record`` with the request) and come back connected once systemd finished
        starting it."""
        from gpuhost.connection.reboot import reboot_and_wait

        reboot_and_wait(self, timeout, record)

    def await_pending_reboot(self, boot_id: str, timeout: float) -> bool:
        """Wait for a reboot an earlier run asked for from boot ``boot_id``; False when none is under way."""
        from gpuhost.connection.reboot import await_pending_reboot

        return await_pending_reboot(self, boot_id, timeout)

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
        wire = self._wire(remote_kill.marked(command))
        watch = Watchdog(transport, timeout, s.keepalive, s.keepalive_count)
        self.sessions_opened += 1
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
        session, stderr = remote_kill.split_sid(b"".join(err_chunks).decode(errors="replace"))
        stdout = b"".join(out_chunks).decode(errors="replace")
        if watch.timed_out:
            if session is not None:
                self.kill_session(*session)
            return CommandResult(
                command,
                TIMEOUT_EXIT,
                stdout,
                stderr + f"\ntimed out after {timeout:g} s",
                time.monotonic() - start,
                timed_out=True,
            )
        if failure is None and code == -1 and transport.is_active():
            # the session ended without an exit status on a live connection: the command was killed by a signal
            # (sshd sends exit-signal, which paramiko does not record); the host is fine
            return CommandResult(
                command,
                KILLED_EXIT,
                stdout,
                stderr + "\nthe command was killed by a signal (no exit status)",
                time.monotonic() - start,
            )
        if failure is not None or code == -1:  # the session ended without an exit status (host went down)
            raise ConnectionFailed(self.name, f"connection lost while running a command: {failure or 'no exit status'}")
        return CommandResult(command, code, stdout, stderr, time.monotonic() - start)

    def kill_session(self, sid: str, start: str) -> None:
        """Kill what a timed-out command left running (its session, see :mod:`remote_kill`); best effort."""
        try:
            chan = self._transport().open_session(timeout=self.settings.connect_timeout)
            try:
                chan.exec_command(self._wire(remote_kill.kill_session_command(sid, start)))
                chan.shutdown_write()
                chan.status_event.wait(self.settings.connect_timeout)
            finally:
                chan.close()
        except (paramiko.SSHException, OSError, EOFError):
            pass  # the host went away: nothing of the command is left to stop there either

    def _wire(self, command: str) -> str:
        """What goes over the channel: the command itself, or as root through ``sudo -n`` (``become``)."""
        if not self.settings.become:
            return command
        import shlex

        return "sudo -n -H -- sh -c " + shlex.quote(command)

    def hold(self, command: str | Sequence[str]) -> Held:
        chan = self.open_channel(to_shell(command))
        self.commands_run += 1
        return _HeldChannel(self.name, chan)

    def open_channel(self, command: str) -> paramiko.Channel:
        """A session running ``command`` (through ``sudo -n`` with ``become``), for a caller that speaks to it."""
        transport = self._transport()
        s = self.settings
        try:
            chan = transport.open_session(timeout=s.keepalive * s.keepalive_count)
            chan.exec_command(self._wire(command))
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise ConnectionFailed(self.name, f"cannot open a channel: {exc}") from None
        self.sessions_opened += 1
        return chan

    def _lost_if(self, watch: Watchdog, transport: paramiko.Transport) -> None:
        """A dead peer: drop the session, so later calls fail at once (reconnect() starts a new one)."""
        if watch.dead or not transport.is_active():
            transport.close()


#: exit status gpuhost gives a command a signal killed (sshd reported no status; 128 + SIGKILL, as a shell would)
KILLED_EXIT = 137
#: seconds :meth:`_HeldChannel.release` waits for the holder to exit
_RELEASE_WAIT = 10.0


def _load_known_hosts(client: paramiko.SSHClient, path: Path, name: str) -> set[tuple[str, str]]:
    """``path``'s host keys into ``client``; the ``(type, base64)`` of its ``@revoked`` keys returned.

    sshd(8) "SSH_KNOWN_HOSTS FILE FORMAT": a line may start with a marker, ``@cert-authority`` (a CA for host
    certificates, which paramiko cannot verify: skipped, so such a host must also be listed by key) or ``@revoked``
    (the key must never be accepted). paramiko's own loader reads a marker as a host name and fails on the line.
    """
    from paramiko.hostkeys import HostKeyEntry, InvalidHostKey

    revoked: set[tuple[str, str]] = set()
    keys = client.get_host_keys()
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ConnectionFailed(name, f"cannot read {path}: {exc.strerror}") from None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        marker = ""
        if line.startswith("@"):
            marker, _, line = line.partition(" ")
            line = line.strip()
        if marker == "@revoked":
            fields = line.split()
            if len(fields) >= 3:
                revoked.add((fields[1], fields[2]))
            continue
        if marker:  # @cert-authority, or a marker OpenSSH does not know either
            continue
        try:
            entry = HostKeyEntry.from_line(line, number)
        except (InvalidHostKey, ValueError, IndexError):
            continue  # OpenSSH skips a line it cannot read too
        if entry is not None and entry.key is not None:
            for host in entry.hostnames:
                keys.add(host, entry.key.get_name(), entry.key)
    return revoked


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
        """End the holder's stdin and wait (a few seconds at most) for it to exit: the lock's holder first stops
        what the run left running (:mod:`gpuhost.connection.remote_kill`), so the lock is free when this returns."""
        transport = self.chan.get_transport()
        try:
            self.chan.shutdown_write()
            if transport is not None and transport.is_active() and not self.chan.closed:
                self.chan.status_event.wait(_RELEASE_WAIT)
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
