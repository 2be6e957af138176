"""Read every fact the tasks' plans will ask for in a few batched round trips, before planning for real.

Each task is planned against a :class:`Recorder`: a :class:`~gpuhost.core.context.HostContext` that answers
from facts already read and records the first fact it does not have (planning stops there). All recorded
facts of one context are then read in one command, and planning is tried again, until no task asks for
anything new. A converged run therefore costs a handful of round trips however many tasks it has; the real
pass then finds every fact cached (a change invalidates the cache, as before).
"""

from __future__ import annotations

import io
import secrets
import shlex
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeVar

from gpuhost.core.facts import Fact
from gpuhost.core.guest import Guest
from gpuhost.core.operation import Operation
from gpuhost.core.result import CommandResult
from gpuhost.core.task import Task

if TYPE_CHECKING:
    from gpuhost.runner.context import RunnerHost

T = TypeVar("T")
MAX_ROUNDS = 4
_MARK = "@@gpuhost-fact@@"
#: this process's frame marker (:func:`batch_command`)
_NONCE = secrets.token_hex(12)


class LiveFact(Exception):
    """The plan asks for a live fact: read when it is asked for, never ahead (planning of that task stops)."""


class NeedFact(Exception):
    def __init__(self, host: RunnerHost, key: tuple[Any, ...]) -> None:
        self.host, self.key = host, key


class Recorder:
    """Plans read facts through this; a missing fact is recorded and planning of that task stops."""

    def __init__(self, host: RunnerHost) -> None:
        self.host = host

    @property
    def name(self) -> str:
        return self.host.name

    @property
    def vars(self) -> Mapping[str, Any]:
        return self.host.vars

    @property
    def check(self) -> bool:
        return self.host.check

    @property
    def reboot_pending(self) -> bool:
        return self.host.reboot_pending

    def restart_pending(self, guest: Guest) -> bool:
        return self.host.restart_pending(guest)

    def fact(self, fact: Fact[T], *args: Any) -> T:
        if fact.live:
            raise LiveFact(fact.name)
        key = (fact, *args)
        if not self.host.has_fact(key):
            raise NeedFact(self.host, key)
        return self.host.fact(fact, *args)

    def guest(self, guest: Guest) -> Recorder:
        return Recorder(self.host.guest(guest))

    def render_template(self, name: str, extra: Mapping[str, Any] | None = None) -> str:
        return self.host.render_template(name, extra)


def batch_command(commands: list[str], first: int = 0, *, level: int = 0) -> str:
    """One script running the commands, the ``first`` leading ones (at once) before the others.

    Slow programs (pveversion, proxmox-boot-tool, systemctl on a real host) run at once, each in a subshell of its
    own writing into files of a temporary folder, since waiting for each in turn costs their sum; after they finish
    the script prints a marker line with their exit codes, the byte size of every output and error file, then the
    files themselves (three programs more: mktemp, stat, cat). Quick reads (:func:`gpuhost.facts.quick.is_quick`),
    and a batch with at most one slow program, run in turn instead, with no folder: each in a subshell of its own
    (a bare read, :func:`~gpuhost.facts.quick.is_bare`, in the script's own shell), its output and error output
    framed by a line before and after on the script's own streams (the one after carries its exit code). A frame's
    line holds this process's nonce and the nesting ``level`` (a container's batch inside the node's is level 1),
    put together by ``printf``: neither the script's text nor any file the node held before the read shows it, so
    no output ends a frame early.

    Two or more reads of a file's content (:func:`~gpuhost.facts.quick.file_read`) after the ``first`` are read
    together, ahead of the others: every such file that is a regular, readable one outside ``/proc``, ``/sys`` and
    ``/dev`` (where sizes are not what ``cat`` reads) goes to one ``stat`` (mode and size) and one ``cat``, in one
    frame that names them; any other runs in a frame of its own, as above."""
    n = len(commands)
    background = _background(commands)
    phases = [range(first), range(first, n)] if 0 < first < n else [range(n)]
    group = _group(commands, phases[-1], background)
    parts = ["d=$(mktemp -d) || exit 1; trap 'rm -rf -- \"$d\"' EXIT"] if background else []
    if len(background) < n:
        parts.append(_frame_functions(*_nonce(level)))
    for phase in phases:
        for i in phase:
            if i in background:
                parts.append(f'( {commands[i]}\n) >"$d/o{i}" 2>"$d/e{i}" </dev/null & p{i}=$!')
        if phase is phases[-1] and group:
            parts.append(_group_script(commands, group))
        for i in phase:
            if i not in background:
                frame = _frame_script(commands[i], i)
                parts.append(f'case " $gpuhost_g " in *" {i} "*) ;; *) {frame} ;; esac' if i in group else frame)
        parts += [f'wait "$p{i}"; r{i}=$?' for i in phase if i in background]
    if background:
        names = " ".join(f"o{i} e{i}" for i in background)
        codes = " ".join(f"$r{i}" for i in background)
        parts += ['cd "$d" || exit 1', f'printf "{_MARK} %s\\n" "{codes}"', f"stat -c %s {names}", f"cat {names}"]
    return "\n".join(parts)


def _frame_functions(a: str, b: str) -> str:
    """The two shell functions that open and close a frame (its index; on closing, the exit code too), on both
    streams. The batch's text is read by the node's shell a byte at a time (its input is a pipe), so the marker's
    halves are written once, here, not twice a frame."""
    return (
        f"gpuhost_begin() {{ printf '%s%s %s\\n' {a} {b} \"$1\"; printf '%s%s %s\\n' {a} {b} \"$1\" >&2; }}\n"
        f'gpuhost_end() {{ printf \'\\n%s%s %s %s\\n\' {a} {b} "$1" "$2";'
        f" printf '\\n%s%s %s\\n' {a} {b} \"$1\" >&2; }}"
    )


def _frame_script(command: str, frame: int | str) -> str:
    """``command`` run in turn, framed on both streams (:func:`_frame_functions`)."""
    from gpuhost.facts.quick import is_bare

    run = f"{command} </dev/null" if is_bare(command) else f"( {command}\n) </dev/null"
    return f"gpuhost_begin {frame}; {run}; gpuhost_end {frame} $?"


#: where a file's size is not what reading it gives (they are read alone)
_PSEUDO = ("/proc/", "/sys/", "/dev/")
#: the reads of a group that did not end well in this process (:func:`_grouped`): read alone from then on, so the
#: next round's batch reads them, whatever made their group fail
_ALONE: set[str] = set()


def _group(commands: list[str], phase: range, background: list[int]) -> list[int]:
    """The file reads of ``phase`` read together (:func:`batch_command`): none unless two or more."""
    from gpuhost.facts.quick import file_read

    found = []
    for i in phase:
        read = file_read(commands[i]) if i not in background and commands[i] not in _ALONE else None
        if read is not None and not read[0].startswith(_PSEUDO):
            found.append(i)
    return found if len(found) > 1 else []


def _group_script(commands: list[str], group: list[int]) -> str:
    """The group's frame: the indexes of the files it read on its first line, a ``stat`` line (mode, size) for each,
    then their bytes one after another. Files that are not regular and readable, and links (a link's size is its
    target's, which may be a file of ``/proc``), are left to frames of their own. The script's positional parameters
    (none: it is a command of its own) hold the paths meanwhile."""
    from gpuhost.facts.quick import file_read

    lines = ["set --; gpuhost_g="]
    for i in group:
        read = file_read(commands[i])
        assert read is not None
        q = shlex.quote(read[0])
        lines.append(f'[ -f {q} ] && [ ! -L {q} ] && [ -r {q} ] && gpuhost_g="$gpuhost_g {i}" && set -- "$@" {q}')
    lines.append(
        'gpuhost_begin g; echo "$gpuhost_g"; [ $# = 0 ] || { stat -L -c "%a %s" -- "$@" && cat -- "$@"; } </dev/null;'
        " gpuhost_end g $?; set --"
    )
    return "\n".join(lines)


def _background(commands: list[str]) -> list[int]:
    """The commands :func:`batch_command` runs at once, in the background: the slow ones, when there are two or
    more (a single slow one costs no more in turn)."""
    from gpuhost.facts.quick import is_quick

    slow = [i for i, c in enumerate(commands) if not is_quick(c)]
    return slow if len(slow) > 1 else []


@lru_cache(maxsize=8)
def _nonce(level: int) -> tuple[str, str]:
    """The two halves of this process's frame marker at nesting ``level`` (the same for every batch it builds, so
    a read sent early and the run's own are the same command)."""
    return _NONCE[:8], f"{_NONCE[8:]}L{level}"


def parse_batch(commands: list[str], stdout: bytes, stderr: bytes, *, level: int = 0) -> list[CommandResult | None]:
    """The results :func:`batch_command` printed, in the order of ``commands`` (None: not read)."""
    frames = _frames(commands, stdout, stderr, level=level)
    return [None if f is None else _result(cmd, f) for cmd, f in zip(commands, frames, strict=True)]


Frame = tuple[int, bytes, bytes]


def _frames(commands: list[str], stdout: bytes, stderr: bytes, *, level: int = 0) -> list[Frame | None]:
    """Exit code, stdout and stderr bytes of each of ``commands`` as :func:`batch_command` ran them (None: not
    read)."""
    n = len(commands)
    background = _background(commands)
    out: list[Frame | None] = [None] * n
    marker = "".join(_nonce(level)).encode()
    grouped = _grouped(commands, stdout, stderr, marker)
    pos = err_pos = 0
    for i in range(n):  # in turn, in the order they ran
        if i in background:
            continue
        if i in grouped:
            out[i] = grouped[i]
            continue
        head = marker + b" %d\n" % i
        tail = b"\n" + marker + b" %d " % i
        start, err_start = stdout.find(head, pos), stderr.find(head, err_pos)
        end = stdout.find(tail, start + len(head)) if start >= 0 else -1
        line_end = stdout.find(b"\n", end + len(tail)) if end >= 0 else -1
        err_end = stderr.find(b"\n" + marker + b" %d\n" % i, err_start + len(head)) if err_start >= 0 else -1
        if line_end < 0 or err_end < 0:
            break  # cut off here: what follows was not read
        code = stdout[end + len(tail) : line_end]
        if code.isdigit():
            out[i] = (int(code), stdout[start + len(head) : end], stderr[err_start + len(head) : err_end])
        pos, err_pos = line_end + 1, err_end + len(head) + 1
    if background:
        for i, frame in zip(background, _sized(len(background), stdout[pos:]), strict=True):
            out[i] = frame
    return out


def _grouped(commands: list[str], stdout: bytes, stderr: bytes, marker: bytes) -> dict[int, Frame | None]:
    """The frames of the file reads read together (:func:`_group_script`), by index: each as its command alone
    would have given it (exit 0, the mode line when asked for, the bytes). None for every one of them when the
    group did not end well (a ``stat`` or ``cat`` error, a byte count other than the sizes, a cut-off): they count
    as not read, and are read alone from then on (the next round's batch reads them so). Empty when there was no
    group."""
    head = marker + b" g\n"
    start = stdout.find(head)
    names_end = stdout.find(b"\n", start + len(head)) if start >= 0 else -1
    if names_end < 0:
        return {}
    names = stdout[start + len(head) : names_end].split()
    if not all(w.isdigit() and int(w) < len(commands) for w in names):
        return {}
    members = [int(w) for w in names]
    found = _group_frames([commands[i] for i in members], stdout, stderr, head, names_end)
    if found is None:
        _ALONE.update(commands[i] for i in members)
        return dict.fromkeys(members)
    return dict(zip(members, found, strict=True))


def _group_frames(reads: list[str], stdout: bytes, stderr: bytes, head: bytes, names_end: int) -> list[Frame] | None:
    """Each of the group's ``reads`` as its command alone gives it (``head``: the frame's first line, its names
    line ending at ``names_end``); None when the group did not end well."""
    from gpuhost.facts.quick import file_read

    files = [file_read(c) for c in reads]
    tail = b"\n" + head[:-1] + b" "
    end = stdout.find(tail, names_end)
    code_end = stdout.find(b"\n", end + len(tail)) if end >= 0 else -1
    err_start = stderr.find(head)
    if code_end < 0 or stdout[end + len(tail) : code_end] != b"0" or err_start < 0:
        return None
    if not stderr.startswith(b"\n" + head, err_start + len(head)):
        return None  # stat or cat had something to say
    lines = stdout[names_end + 1 : end].split(b"\n", len(reads))
    stats = [line.split(b" ") for line in lines[:-1]]
    if len(lines) != len(reads) + 1 or not all(len(f) == 2 and f[0].isdigit() and f[1].isdigit() for f in stats):
        return None
    body, pos = lines[-1], 0
    if sum(int(f[1]) for f in stats) != len(body) or None in files:
        return None  # a file changed size between stat and cat
    out: list[Frame] = []
    for read, (mode, size) in zip(files, stats, strict=True):
        assert read is not None
        data = body[pos : pos + int(size)]
        pos += int(size)
        out.append((0, mode + b"\n" + data if read[1] else data, b""))
    return out


def _sized(n: int, stdout: bytes) -> list[Frame | None]:
    """The ``n`` background commands' frames: a marker line with their exit codes, each output and error file's
    size, then the files."""
    out: list[Frame | None] = [None] * n
    start = stdout.find(_MARK.encode() + b" ")
    if start < 0 or (start > 0 and stdout[start - 1 : start] != b"\n"):
        return out
    lines = stdout[start:].split(b"\n", 1 + 2 * n)
    if len(lines) < 2 + 2 * n:
        return out
    codes = lines[0].split()[1:]
    try:
        sizes = [int(x) for x in lines[1 : 1 + 2 * n]]
    except ValueError:
        return out
    body, pos = lines[-1], 0
    for i in range(n):
        o = body[pos : pos + sizes[2 * i]]
        pos += sizes[2 * i]
        e = body[pos : pos + sizes[2 * i + 1]]
        pos += sizes[2 * i + 1]
        if i < len(codes) and codes[i].isdigit() and pos <= len(body):
            out[i] = (int(codes[i]), o, e)
    return out


def _fetch(host: RunnerHost, keys: list[tuple[Any, ...]]) -> None:
    commands = [key[0].command(*key[1:]) for key in keys]
    for key, res in zip(keys, parse_batch(commands, *_run_batch(host, batch_command(commands))), strict=True):
        if res is not None:
            host.store_result(key, res)


def _nested_ctid(host: RunnerHost, target: RunnerHost) -> int | None:
    """The container id when ``target`` is a container of ``host`` reached through ``pct exec`` over host's own
    connection (its batch can then run inside host's batch, one round trip for both); else None."""
    return target.lxc_id if target.parent is host else None


def _run_batch(host: RunnerHost, command: str) -> tuple[bytes, bytes]:
    """The output and error output of a batch of reads on ``host``: over its kept connection when one answers,
    else its own."""
    kept = host.kept_read(command)
    if kept is not None:
        return kept[1], kept[2].encode()
    sink = io.BytesIO()
    result = host.conn.run(command, check=False, stdout_sink=sink)
    return sink.getvalue(), result.stderr.encode()


def _fetch_round(host: RunnerHost, wanted: list[tuple[RunnerHost, list[tuple[Any, ...]]]]) -> None:
    """One round's reads: host's own facts and those of its containers (each container's batch run inside host's
    batch through ``pct exec``, see :func:`_nested_ctid`) in one command; any other target in its own."""
    own: list[tuple[Any, ...]] = []
    nested: list[tuple[RunnerHost, int, list[tuple[Any, ...]]]] = []
    for target, keys in wanted:
        ctid = None if target is host else _nested_ctid(host, target)
        if target is host:
            own += keys
        elif ctid is not None:
            nested.append((target, ctid, keys))
        else:
            _fetch(target, keys)
    if not nested:
        if own:
            _fetch(host, own)
        return
    found, inside = fetch_nested(
        host,
        [key[0].command(*key[1:]) for key in own],
        [(ctid, [key[0].command(*key[1:]) for key in keys]) for _t, ctid, keys in nested],
    )
    for key, res in zip(own, found, strict=True):
        if res is not None:
            host.store_result(key, res)
    for (target, _ctid, keys), results in zip(nested, inside, strict=True):
        for key, res in zip(keys, results, strict=True):
            if res is not None:
                target.store_result(key, res)


Results = list[CommandResult | None]


def fetch_nested(
    host: RunnerHost, own: list[str], nested: list[tuple[int, list[str]]], *, first: int = 0
) -> tuple[Results, list[Results]]:
    """Host's ``own`` commands and each container's (``(ctid, commands)``, run inside host's batch through
    ``pct exec``) in one command, the ``first`` of ``own`` finished before the others start; their results in
    order (None: not read, as every command of a container that is not running)."""
    commands = _nested_commands(own, nested)
    frames = _frames(commands, *_run_batch(host, batch_command(commands, first)))
    found = [None if f is None else _result(cmd, f) for cmd, f in zip(own, frames, strict=False)]
    inside: list[Results] = []
    for (_ctid, cmds), frame in zip(nested, frames[len(own) :], strict=True):
        subs = _frames(cmds, frame[1], frame[2], level=1) if frame is not None else [None] * len(cmds)
        inside.append([None if f is None else _result(c, f) for c, f in zip(cmds, subs, strict=True)])
    return found, inside


def nested_batch(own: list[str], nested: list[tuple[int, list[str]]], first: int = 0) -> str:
    """The one command :func:`fetch_nested` sends: ``own`` and each container's commands nested through
    ``pct exec``, the ``first`` of ``own`` finished before the others start."""
    return batch_command(_nested_commands(own, nested), first)


def _nested_commands(own: list[str], nested: list[tuple[int, list[str]]]) -> list[str]:
    """``own``, then each container's batch (at level 1) through ``pct exec``."""
    from gpuhost.connection.pct import pct_command

    return own + [pct_command(ctid, batch_command(cmds, level=1)) for ctid, cmds in nested]


def _result(command: str, frame: tuple[int, bytes, bytes]) -> CommandResult:
    return CommandResult(command, frame[0], frame[1].decode(errors="replace"), frame[2].decode(errors="replace"))


def _want(wanted: dict[int, tuple[RunnerHost, list[tuple[Any, ...]]]], need: NeedFact) -> None:
    entry = wanted.setdefault(id(need.host), (need.host, []))
    if need.key not in entry[1]:
        entry[1].append(need.key)


def _plan_ahead(op: Operation[Any], rec: Recorder, wanted: dict[int, tuple[RunnerHost, list[tuple[Any, ...]]]]) -> None:
    """The facts behind the one the plan stopped at (:meth:`Operation.plan_ahead`), in the same round: only those
    read in the host's own batch (its own, or a container's through ``pct exec`` inside it), where a read that does
    not apply costs nothing; a guest with a connection of its own (a VM over SSH) may not be up to answer."""
    try:
        op.plan_ahead(rec)
    except NeedFact as need:
        if need.host is rec.host or _nested_ctid(rec.host, need.host) is not None:
            _want(wanted, need)
    except Exception:  # noqa: BLE001 - a guess that does not plan reads nothing more
        return


def prefetch(host: RunnerHost, tasks: list[Task], also: list[tuple[Any, ...]] | None = None) -> int:
    """Batch-read the facts ``tasks`` will ask for (and the ``also`` keys the runner itself reads); returns
    the rounds used."""
    host.begin_batches()
    planned = [t for t in tasks if not t.is_flush]
    extra = [k for k in also or [] if not host.has_fact(k)]
    for rounds in range(1, MAX_ROUNDS + 1):
        wanted: dict[int, tuple[RunnerHost, list[tuple[Any, ...]]]] = {}
        if extra:
            wanted[id(host)] = (host, list(extra))
            extra = []
        for task in planned:
            rec = Recorder(host)
            op: Operation[Any] | None = None
            try:
                op = task.operation_for(rec)
                op.plan(rec)
            except NeedFact as need:
                _want(wanted, need)
                if op is not None:
                    _plan_ahead(op, rec, wanted)
            except Exception:  # noqa: BLE001 - the real pass reports planning errors (and reads live facts)
                continue
        if not wanted:
            return rounds - 1
        _fetch_round(host, list(wanted.values()))
    return MAX_ROUNDS
