"""Nodes' SSH connections kept open between runs (``ssh.persist: SECONDS``), as OpenSSH's ControlPersist keeps
a master connection and Ansible turns it on for every run.

A converged run is one remembered read per node (:mod:`gpuhost.runner.remembered`). Made over a fresh
connection it pays for paramiko's import, the SSH handshake and the node's first session (sshd sets up the
login once per connection) several times over the read itself. So, for a node whose inventory entry sets
``ssh.persist``, the run ends by asking this user's *keeper* to hold a connection to it (starting the keeper
when none runs), and the next run sends its reads of the node (the facts' commands, read-only by contract,
and their batches) to the keeper, which runs each on that connection and answers with its output, until the
run opens a connection of its own. Nothing else goes through the keeper: a change, the run lock, a container's
own reads, and a read the keeper cannot answer (no keeper, no connection for that node yet, a connection that
died with a reboot) go over the run's own connection.

The keeper is one process per user (``python -m gpuhost.connection.persist``, its id in ``persist.pid``),
listening on ``$XDG_RUNTIME_DIR/gpuhost/persist.sock`` (else ``/tmp/gpuhost-UID/``): a folder only the user can enter
(a folder another user owns or can write is not used), a socket only the user can open, and every peer's
user checked (``SO_PEERCRED``), as OpenSSH's control sockets are kept. It holds each connection until
``persist`` seconds pass without a read, or the connection ends, and exits when it holds none. A connection idle
for longer than the node's ``ssh.keepalive`` must answer a keepalive within a few seconds before it is read
over (a node that vanished leaves TCP open, unnoticed): else the run is told to read over its own. A kept
connection is named by the node's address, its inventory ``ssh`` settings, the ``~/.ssh/config`` they
are completed from (an edit of either opens a new one) and the run's network namespace; its host key was checked
when it was opened, against the node's known_hosts (strictly: a key is never recorded by the keeper), and the
password it logged in with, if any, is dropped once it has.

Protocol: one JSON line each way per Unix-socket connection. ``{"op": "keep", "id", "name", "settings",
"persist"}`` → ``{"kept": true}``; ``{"op": "run", "id", "command", "timeout"}`` → ``{"held": false}`` or
``{"held": true, "exit", "stdout", "stderr"}`` (stdout in base64); ``{"op": "runs", "reads": [{"id", "command",
"timeout"}, ...]}`` → one line per read as it finishes (the reads run at once), each a ``run`` answer with ``"i"``,
the read's index, and the connection closed after the last.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuhost.core.result import KeptAnswer

if TYPE_CHECKING:
    from gpuhost.connection.read_shell import ReadShell
    from gpuhost.connection.settings import SSHSettings
    from gpuhost.connection.ssh import SSHConnection
    from gpuhost.inventory.models import NodeSpec


SOCKET = "persist.sock"
#: the keeper's process id, while it runs
PIDFILE = "persist.pid"
#: a keeper answers at once or is not there
CONNECT_WAIT = 0.5
#: beyond a read's own timeout, how long a run waits for the keeper's answer
ANSWER_GRACE = 30.0
#: the longest a connection idle for more than its ``keepalive`` is given to answer a keepalive before a read
PROBE_WAIT = 3.0


def runtime_dir() -> Path:
    base = os.environ.get("XDG_RUNTIME_DIR")
    return Path(base) / "gpuhost" if base else Path(f"/tmp/gpuhost-{os.getuid()}")


def private(folder: Path) -> bool:
    """``folder`` is a real folder of this user's that no other user can enter or write."""
    try:
        st = folder.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def identity(node: NodeSpec) -> str:
    """The name of a kept connection to ``node``: its address and inventory ``ssh`` settings, the size and time
    of the ``~/.ssh/config`` they are completed from, and the network namespace the run is in (the same address
    can be another machine in another namespace: ``ip netns exec``)."""
    config = node.ssh.config_file
    try:
        st = Path(config).expanduser().stat()
        seen: list[int] | None = [st.st_size, st.st_mtime_ns]
    except (OSError, ValueError):
        seen = None
    doc = [node.address, node.ssh.model_dump(mode="json"), seen, _network_namespace()]
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32]


def _network_namespace() -> list[int] | None:
    try:
        st = os.stat("/proc/self/ns/net")
    except OSError:
        return None
    return [st.st_dev, st.st_ino]


# -- a run's side ------------------------------------------------------------------------------
def _connected() -> socket.socket | None:
    """A socket connected to this user's keeper; None when none answers (none runs, or it is not this user's)."""
    folder = runtime_dir()
    if not private(folder):
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_WAIT)
        sock.connect(str(folder / SOCKET))
    except OSError:
        sock.close()
        return None
    return sock


def _ask(doc: dict[str, Any], wait: float | None) -> dict[str, Any] | None:
    """The keeper's answer to ``doc``; None when no keeper answers (none runs, or it is not this user's)."""
    sock = _connected()
    if sock is None:
        return None
    try:
        sock.settimeout(wait)
        sock.sendall(json.dumps(doc).encode() + b"\n")
        data = _read_line(sock)
        answer = json.loads(data) if data else None
    except (OSError, ValueError):
        return None
    finally:
        sock.close()
    return answer if isinstance(answer, dict) else None


def read(node: NodeSpec, command: str, timeout: float | None) -> KeptAnswer:
    """The exit status, output and error output of ``command`` (read-only) run on ``node`` over the connection
    the keeper holds for it; None when it holds none (the caller runs the command itself)."""
    doc = {"op": "run", "id": identity(node), "command": command, "timeout": timeout}
    answer = _ask(doc, None if timeout is None else timeout + ANSWER_GRACE)
    return None if answer is None else _answer(answer)


def _answer(answer: dict[str, Any]) -> KeptAnswer:
    """A ``run`` answer as a read's result; None when the keeper held no connection for it."""
    if answer.get("held") is not True:
        return None
    try:
        return int(answer["exit"]), base64.b64decode(answer["stdout"], validate=True), str(answer["stderr"])
    except (KeyError, TypeError, ValueError):
        return None


def read_all(reads: list[tuple[NodeSpec, str]], deliver: Callable[[int, KeptAnswer], None]) -> None:
    """Each of ``reads`` (a node and a read-only command) run at once over the connections the keeper holds, in
    one request: ``deliver(i, answer)`` is called as the ``i``-th read's answer comes (exit status, output, error
    output), and with None for a read the keeper did not answer (it holds no connection to that node, or no keeper
    answers). Returns when every read was delivered."""
    done = [False] * len(reads)

    def give(i: int, answer: KeptAnswer) -> None:
        if 0 <= i < len(reads) and not done[i]:
            done[i] = True
            deliver(i, answer)

    timeouts = [n.ssh.command_timeout for n, _c in reads]
    doc = {
        "op": "runs",
        "reads": [{"id": identity(n), "command": c, "timeout": t} for (n, c), t in zip(reads, timeouts, strict=True)],
    }
    wait = None if None in timeouts else max((t for t in timeouts if t is not None), default=0.0) + ANSWER_GRACE
    sock = _connected()
    try:
        if sock is not None and reads:
            sock.settimeout(wait)
            sock.sendall(json.dumps(doc).encode() + b"\n")
            for line in _lines(sock):
                answer = json.loads(line)
                if isinstance(answer, dict) and isinstance(answer.get("i"), int):
                    give(answer["i"], _answer(answer))
    except (OSError, ValueError):
        pass
    finally:
        if sock is not None:
            sock.close()
        for i in range(len(reads)):
            give(i, None)


def touch(nodes: list[NodeSpec]) -> list[bool]:
    """Whether the keeper holds a connection to each of ``nodes`` (one request for all); each it holds is kept
    its ``ssh.persist`` seconds from now."""
    doc = {"op": "touch", "ids": [identity(n) for n in nodes], "persist": [n.ssh.persist for n in nodes]}
    answer = _ask(doc, 5.0)
    kept = answer.get("kept") if answer is not None else None
    if not isinstance(kept, list) or len(kept) != len(nodes):
        return [False] * len(nodes)
    return [k is True for k in kept]


def keep(nodes: list[tuple[NodeSpec, SSHSettings]]) -> None:
    """Ask the keeper to hold a connection to each node for its ``ssh.persist`` seconds after each use,
    starting the keeper when none answers. Returns at once: the keeper connects on its own."""
    docs = [
        {"op": "keep", "id": identity(n), "name": n.name, "settings": asdict(s), "persist": n.ssh.persist}
        for n, s in nodes
    ]
    pending = [d for d in docs if _ask(d, 5.0) is None]
    if pending:
        _start(pending)


def _start(docs: list[dict[str, Any]]) -> None:
    folder = runtime_dir()
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return
    if not private(folder):
        return
    source = str(Path(__file__).resolve().parents[2])  # where this gpuhost is imported from
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": source + (os.pathsep + path if path else "")}
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpuhost.connection.persist"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            env=env,
            start_new_session=True,
        )
    except OSError:
        return
    assert proc.stdin is not None
    try:
        proc.stdin.write("".join(json.dumps(d) + "\n" for d in docs).encode())
        proc.stdin.close()
    except OSError:
        pass


def _lines(sock: socket.socket) -> Iterator[bytes]:
    """The lines ``sock`` sends, each as it is complete, until it closes."""
    rest = b""
    while True:
        data = sock.recv(65536)
        if not data:
            return
        *whole, rest = (rest + data).split(b"\n")
        yield from (line for line in whole if line)


def _read_line(sock: socket.socket) -> bytes:
    chunks: list[bytes] = []
    while True:
        data = sock.recv(65536)
        if not data:
            break
        chunks.append(data)
        if data.endswith(b"\n"):
            break
    return b"".join(chunks)


# -- the keeper --------------------------------------------------------------------------------
def _settings(doc: dict[str, Any]) -> SSHSettings:
    """The settings a run sent, host keys checked strictly (the run that asked has checked or recorded the key)."""
    from gpuhost.connection.settings import SSHSettings

    jump = doc.get("jump")
    fields = {**doc, "key_files": tuple(doc.get("key_files") or ()), "host_key_policy": "strict"}
    fields["jump"] = _settings(jump) if jump else None
    return SSHSettings(**fields)


def _without_password(s: SSHSettings) -> SSHSettings:
    from dataclasses import replace

    return replace(s, password=None, jump=_without_password(s.jump) if s.jump is not None else None)


class _Kept:
    """One node's connection, its reads one at a time (a connection serves one thread)."""

    def __init__(self, name: str, settings: SSHSettings, persist: float) -> None:
        self.name, self.settings, self.persist = name, settings, persist
        self.probe_wait = min(settings.connect_timeout, PROBE_WAIT)
        self.conn: SSHConnection | None = None
        self.shell: ReadShell | None = None
        self.no_shell = False
        self.failed = False
        self.used = time.monotonic()
        self.lock = threading.Lock()

    def open(self) -> None:
        from gpuhost.connection.ssh import SSHConnection

        try:
            self.conn = SSHConnection(f"{self.name} (kept)", self.settings)
        except Exception:  # noqa: BLE001 - whatever stopped it, a connection not opened is not held, nor waited for
            self.failed = True
        # a password is needed to log in, not to hold the connection: the keeper does not keep it
        self.settings = _without_password(self.settings)
        if self.conn is not None:
            self.conn.settings = self.settings

    def ended(self, now: float) -> bool:
        if self.failed:
            return True
        if self.conn is None or self.lock.locked():
            return False  # still connecting, or reading
        return now - self.used > self.persist or not self.conn.is_open()

    def run(self, command: str, timeout: float | None) -> dict[str, Any]:
        import io

        from gpuhost.errors import GpuhostError

        with self.lock:
            conn = self.conn
            if conn is None or self.failed or not conn.is_open():
                return {"held": False}
            if time.monotonic() - self.used > self.settings.keepalive and not conn.answers(self.probe_wait):
                self.failed = True  # a node that went away without a word: the run connects (and says so) itself
                return {"held": False}
            answer = self._in_shell(conn, command, timeout)
            if answer is None:
                sink = io.BytesIO()
                try:
                    result = conn.run(command, check=False, timeout=timeout, stdout_sink=sink)
                except GpuhostError:
                    self.failed = True
                    return {"held": False}
                answer = result.exit_code, sink.getvalue(), result.stderr
            self.used = time.monotonic()
        code, stdout, stderr = answer
        return {"held": True, "exit": code, "stdout": base64.b64encode(stdout).decode(), "stderr": stderr}

    def _in_shell(self, conn: SSHConnection, command: str, timeout: float | None) -> KeptAnswer:
        """The read run in the node's kept shell (:mod:`gpuhost.connection.read_shell`, started on first use);
        None when no shell could run it (the read then goes as a command of its own, and the next read starts
        a new shell)."""
        from gpuhost.connection.read_shell import ReadShell
        from gpuhost.errors import GpuhostError

        if self.no_shell:
            return None
        if self.shell is None or self.shell.ended:
            try:
                self.shell = ReadShell(conn)
            except GpuhostError:
                self.no_shell = True
                return None
        answer = self.shell.run(command, timeout)
        if answer is None and not self.shell.answered:
            self.no_shell = True  # a node whose shell never answered a read: its reads go as commands of their own
        return answer

    def close(self) -> None:
        with self.lock:
            if self.shell is not None:
                self.shell.close()
            if self.conn is not None:
                self.conn.close()


class Keeper:
    def __init__(self) -> None:
        self.kept: dict[str, _Kept] = {}
        self.mu = threading.RLock()

    def answer(self, doc: dict[str, Any]) -> dict[str, Any]:
        if doc.get("op") == "keep":
            return self.keep(doc)
        if doc.get("op") == "touch":
            pairs = zip(doc["ids"], doc["persist"], strict=True)
            return {"kept": [self.touch(str(key), float(persist)) for key, persist in pairs]}
        if doc.get("op") == "run":
            kept = self.kept.get(str(doc.get("id")))
            if kept is None:
                return {"held": False}
            timeout = doc.get("timeout")
            return kept.run(str(doc.get("command")), float(timeout) if timeout is not None else None)
        return {"error": "unknown op"}

    def touch(self, key: str, persist: float) -> bool:
        with self.mu:
            kept = self.kept.get(key)
            if kept is None or kept.ended(time.monotonic()):
                return False
            kept.persist, kept.used = persist, time.monotonic()
            return True

    def keep(self, doc: dict[str, Any]) -> dict[str, Any]:
        key = str(doc["id"])
        with self.mu:
            if self.touch(key, float(doc["persist"])):
                return {"kept": True}
            kept = _Kept(str(doc["name"]), _settings(doc["settings"]), float(doc["persist"]))
            ended = self.kept.get(key)
            self.kept[key] = kept
        if ended is not None:
            ended.close()  # failed or idle out, not yet closed by expire()
        threading.Thread(target=kept.open, daemon=True).start()
        return {"kept": True}

    def expire(self) -> bool:
        """Close what ended; whether any connection is still held (or being opened)."""
        now = time.monotonic()
        with self.mu:
            gone = [k for k, v in self.kept.items() if v.ended(now)]
            ended = [self.kept.pop(k) for k in gone]
            held = bool(self.kept)
        for kept in ended:
            kept.close()
        return held

    def runs(self, reads: list[Any], client: socket.socket) -> None:
        """Each read run at once (on its node's connection), its answer sent with its index as it finishes."""
        sending = threading.Lock()

        def one(i: int, doc: Any) -> None:
            try:
                answer = {"i": i, **self.answer({**doc, "op": "run"})}
            except (ValueError, KeyError, TypeError):
                answer = {"i": i, "held": False}
            with sending:
                try:
                    client.sendall(json.dumps(answer).encode() + b"\n")
                except OSError:
                    pass  # the run went away; its reads still end

        threads = [threading.Thread(target=one, args=(i, d), daemon=True) for i, d in enumerate(reads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def serve_one(self, client: socket.socket) -> None:
        with client:
            try:
                creds = client.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
                if struct.unpack("3i", creds)[1] != os.getuid():
                    return
                client.settimeout(10.0)
                doc = json.loads(_read_line(client))
                client.settimeout(None)
                if isinstance(doc, dict) and doc.get("op") == "runs" and isinstance(doc.get("reads"), list):
                    self.runs(doc["reads"], client)
                    return
                answer = self.answer(doc) if isinstance(doc, dict) else {"error": "not a request"}
                client.sendall(json.dumps(answer).encode() + b"\n")
            except (OSError, ValueError, KeyError, TypeError):
                return


def serve(docs: list[dict[str, Any]]) -> int:
    """The keeper: hold what ``docs`` ask for and answer on the socket until nothing is held. A second keeper
    (two runs started one at once) hands its requests to the first and exits."""
    import fcntl

    folder = runtime_dir()
    if not private(folder):
        return 1
    lock = open(folder / "persist.lock", "a")  # noqa: SIM115 - held for the keeper's life
    deadline = time.monotonic() + 3.0
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if all(_ask(d, 5.0) is not None for d in docs) or time.monotonic() > deadline:
                return 0
            time.sleep(0.1)
    (folder / PIDFILE).write_text(f"{os.getpid()}\n")
    path = folder / SOCKET
    path.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    umask = os.umask(0o177)
    try:
        server.bind(str(path))
    finally:
        os.umask(umask)
    server.listen(64)
    server.settimeout(0.5)
    keeper = Keeper()
    for doc in docs:
        keeper.keep(doc)
    try:
        while True:
            try:
                client, _ = server.accept()
            except TimeoutError:
                client = None
            if client is not None:
                threading.Thread(target=keeper.serve_one, args=(client,), daemon=True).start()
            if not keeper.expire():
                break
    finally:
        path.unlink(missing_ok=True)
        (folder / PIDFILE).unlink(missing_ok=True)
        server.close()
    return 0


def main() -> int:
    import signal

    def leave(_signum: int, _frame: object) -> None:
        raise SystemExit(0)  # through serve's cleanup: the socket and the pid file go

    signal.signal(signal.SIGTERM, leave)
    docs = [json.loads(line) for line in sys.stdin.read().splitlines() if line.strip()]
    return serve([d for d in docs if isinstance(d, dict) and d.get("op") == "keep"])


if __name__ == "__main__":
    sys.exit(main())
