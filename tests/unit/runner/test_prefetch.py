"""Facts read ahead in one batched command per round: parsed exactly as if read one by one."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

from gpuhost.core.guest import Guest
from gpuhost.facts import files
from gpuhost.runner.prefetch import batch_command, parse_batch
from tests.support.local import local_host


def batched(host, commands: list[str]) -> tuple[bytes, bytes]:  # noqa: ANN001
    sink = io.BytesIO()
    result = host.conn.run(batch_command(commands), check=False, stdout_sink=sink)
    return sink.getvalue(), result.stderr.encode()


def test_batch_keeps_each_commands_output_error_and_status(tmp_path: Path) -> None:
    commands = [
        "printf 'a\\nb'",
        "echo oops >&2; exit 3",
        "printf '@@gpuhost-fact@@ 0 9 x y\\n'",
        "true",
        "printf 'caf\\303\\251 \\377\\n\\n'; exit 44",
    ]
    host = local_host()
    results = parse_batch(commands, *batched(host, commands))
    assert [(r.stdout, r.stderr, r.exit_code) for r in results if r] == [
        ("a\nb", "", 0),
        ("", "oops\n", 3),
        ("@@gpuhost-fact@@ 0 9 x y\n", "", 0),
        ("", "", 0),
        ("caf\u00e9 \ufffd\n\n", "", 44),
    ]


def test_a_cut_off_batch_reads_as_not_read() -> None:
    commands = ["echo a", "echo b"]
    whole = parse_batch(commands, *batched(local_host(), commands))
    assert [r.stdout for r in whole if r] == ["a\n", "b\n"]
    out, err = batched(local_host(), commands)
    assert parse_batch(commands, out[:-1], err)[1] is None
    assert parse_batch(commands, b"", b"") == [None, None]


def test_prefetched_facts_parse_like_direct_reads(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("hello\n")
    host = local_host()
    keys = [
        (files.content, str(tmp_path / "f")),
        (files.content, str(tmp_path / "missing")),
        (files.exists, str(tmp_path)),
    ]
    commands = [k[0].command(*k[1:]) for k in keys]
    before = host.conn.commands_run
    for key, res in zip(keys, parse_batch(commands, *batched(host, commands)), strict=True):
        assert res is not None
        host.store_result(key, res)
    assert host.conn.commands_run == before + 1
    assert host.fact(files.content, str(tmp_path / "f")) == "hello\n"
    assert host.fact(files.content, str(tmp_path / "missing")) is None
    assert host.fact(files.exists, str(tmp_path)) is True
    assert host.conn.commands_run == before + 1  # no further round trip


def test_a_containers_facts_ride_in_the_nodes_batch_one_round_trip(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """The node's facts and its container's (``pct exec CTID -- sh -c …``, here a ``pct`` on PATH that runs the
    command locally) come back from one command on the node, each parsed as if read by itself."""
    from gpuhost.core.guest import Guest
    from gpuhost.runner.prefetch import _fetch_round

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    pct = bin_dir / "pct"
    pct.write_text('#!/bin/sh\n[ "$1" = exec ] && [ "$2" = 200 ] && [ "$3" = -- ] || exit 2\nshift 3\nexec "$@"\n')
    pct.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    (tmp_path / "node.txt").write_text("on the node\n")
    (tmp_path / "ct.bin").write_bytes(b"caf\xc3\xa9 \xff\n")
    node = local_host()
    ct = node.guest(Guest.ct(200))
    node_keys = [(files.content, str(tmp_path / "node.txt")), (files.exists, str(tmp_path / "missing"))]
    ct_keys = [(files.content, str(tmp_path / "ct.bin")), (files.content, str(tmp_path / "absent"))]
    before = node.conn.commands_run
    _fetch_round(node, [(node, node_keys), (ct, ct_keys)])
    assert node.conn.commands_run == before + 1
    assert ct.conn.commands_run == 0
    assert all(node.has_fact(k) for k in node_keys) and all(ct.has_fact(k) for k in ct_keys)
    assert node.fact(files.content, str(tmp_path / "node.txt")) == "on the node\n"
    assert node.fact(files.exists, str(tmp_path / "missing")) is False
    assert ct.fact(files.content, str(tmp_path / "ct.bin")) == "caf\u00e9 \ufffd\n"
    assert ct.fact(files.content, str(tmp_path / "absent")) is None
    assert node.total_round_trips() == before + 1


def test_a_container_that_cannot_run_its_batch_leaves_its_facts_unread(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    from gpuhost.core.guest import Guest
    from gpuhost.runner.prefetch import _fetch_round

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pct").write_text("#!/bin/sh\necho 'CT 200 not running' >&2\nexit 255\n")
    (bin_dir / "pct").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    (tmp_path / "node.txt").write_text("x\n")
    node = local_host()
    ct = node.guest(Guest.ct(200))
    key = (files.content, str(tmp_path / "node.txt"))
    inside = (files.content, "/etc/hostname")
    _fetch_round(node, [(node, [key]), (ct, [inside])])
    assert node.has_fact(key) and not ct.has_fact(inside)  # read later by the task that needs it, as before


def test_read_facts_outside_a_run_is_one_command_parsed_as_each_alone(tmp_path: Path) -> None:
    from gpuhost.connection.local import LocalConnection
    from gpuhost.runner.batch_read import read_batch, read_facts

    (tmp_path / "f").write_text("hello\n")
    conn = LocalConnection()
    got = read_facts(conn, (files.content, str(tmp_path / "f")), (files.exists, str(tmp_path / "nope")))
    assert got == ["hello\n", False] and conn.commands_run == 1
    codes = [r.exit_code for r in read_batch(conn, [f"test -c {tmp_path / 'f'}", "test -c /dev/null"])]
    assert codes == [1, 0] and conn.commands_run == 2


def test_a_container_operations_facts_are_read_in_the_same_round_as_its_status(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """An in_container operation's plan stops at the container's status; the read-ahead also plans the inner
    operation (plan_ahead), so the fact it reads inside comes back in the same batch: one round trip, one round."""
    from gpuhost.core.operation import Args, Operation
    from gpuhost.core.plan import Plan, nothing
    from gpuhost.core.task import Task
    from gpuhost.facts.pve import ct_status
    from gpuhost.operations.lxc import InContainerArgs, InCt
    from gpuhost.runner.prefetch import prefetch

    class PathArgs(Args):
        path: str

    class ReadsInside(Operation[PathArgs]):
        kind = "reads_inside"
        Args = PathArgs

        def plan(self, host: Any) -> Plan:
            return nothing(f"{len(host.fact(files.content, self.args.path) or '')} bytes")

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "pct.log"
    (bin_dir / "pct").write_text(
        f'#!/bin/sh\necho "$1 $2" >> {calls}\n'
        '[ "$1" = status ] && [ "$2" = 200 ] && { echo "status: running"; exit 0; }\n'
        '[ "$1" = exec ] && [ "$2" = 200 ] && [ "$3" = -- ] || exit 2\nshift 3\nexec "$@"\n'
    )
    (bin_dir / "pct").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    (tmp_path / "inside.txt").write_text("hello\n")
    node = local_host()
    inner = ReadsInside(PathArgs(path=str(tmp_path / "inside.txt")))
    task = Task(name="t", kind="in_container", operation=InCt(InContainerArgs(ctid=200, operation=inner)))
    before = node.conn.commands_run
    rounds = prefetch(node, [task])
    assert (rounds, node.conn.commands_run - before) == (1, 1)
    assert node.fact(ct_status, 200) == "running"
    ct = node.guest(Guest.ct(200))
    assert ct.has_fact((files.content, str(tmp_path / "inside.txt")))
    # The batch runs its reads side by side, so the two pct calls may log in either order.
    assert sorted(calls.read_text().split("\n")[:-1]) == ["exec 200", "status 200"]


def _alone(host, commands: list[str]) -> list[tuple[str, str, int]]:  # noqa: ANN001
    return [(r.stdout, r.stderr, r.exit_code) for r in (host.conn.run(c, check=False) for c in commands)]


def test_quick_reads_and_slow_programs_in_one_batch_each_read_as_if_run_alone(tmp_path: Path) -> None:
    """File reads run in turn on the batch's own streams, slow programs at once in the background: whichever way,
    each result is what the command gives run by itself, whatever the files hold."""
    (tmp_path / "no-newline").write_bytes(b"last line")
    (tmp_path / "blank-lines").write_bytes(b"a\n\n\n")
    (tmp_path / "lookalike").write_bytes(b"@@gpuhost-fact@@ 0 1\n0\n1\nx\n000000000000000000000000L0 2 0\n")
    (tmp_path / "bytes").write_bytes(b"caf\xc3\xa9 \xff\x00\n")
    quick = [
        files.content.command(str(tmp_path / "no-newline")),
        files.content_and_mode.command(str(tmp_path / "blank-lines")),
        files.content.command(str(tmp_path / "lookalike")),
        files.content.command(str(tmp_path / "missing")),
        files.content.command(str(tmp_path)),  # a folder: cat's own error and status
        files.mode.command(str(tmp_path / "bytes")),
        files.content.command(str(tmp_path / "bytes")),
    ]
    slow = ["sleep 0.2; echo first slow", "echo second slow >&2; exit 3"]
    host = local_host()
    for commands in (quick, [*quick, slow[0]], [slow[0], *quick, slow[1]]):
        results = parse_batch(commands, *batched(host, commands))
        assert [(r.stdout, r.stderr, r.exit_code) for r in results if r] == _alone(host, commands)


def test_a_batch_cut_short_in_its_quick_reads_reads_none_after_the_cut() -> None:
    commands = [files.exists.command("/"), files.exists.command("/nonexistent"), files.mode.command("/")]
    out, err = batched(local_host(), commands)
    whole = parse_batch(commands, out, err)
    assert [r.exit_code for r in whole if r] == [0, 1, 0]
    cut = out[: out.rindex(b"\n", 0, len(out) - 1)]  # the last frame's closing line lost
    assert [r is not None for r in parse_batch(commands, cut, err)] == [True, True, False]


def test_the_first_reads_finish_before_the_others_start_in_a_mixed_batch(tmp_path: Path) -> None:
    flag = tmp_path / "flag"
    first = [f"sleep 0.3; touch {flag}", "sleep 0.1"]
    after = [files.exists.command(str(flag)), f"test -e {flag}", "true"]
    commands = first + after
    out, err = batched_first(local_host(), commands, len(first))
    assert [r.exit_code for r in parse_batch(commands, out, err) if r] == [0, 0, 0, 0, 0]


def batched_first(host, commands: list[str], first: int) -> tuple[bytes, bytes]:  # noqa: ANN001
    sink = io.BytesIO()
    result = host.conn.run(batch_command(commands, first), check=False, stdout_sink=sink)
    return sink.getvalue(), result.stderr.encode()


def _counting(tmp_path: Path, monkeypatch, *, stat_lies: bool = False) -> Path:  # noqa: ANN001
    """``stat`` and ``cat`` on PATH that log each start and run the real ones (``stat_lies``: stat reports every
    file one byte longer, as if it grew between stat and cat)."""
    import shutil

    bin_dir, log = tmp_path / "bin", tmp_path / "programs.log"
    bin_dir.mkdir()
    real_stat, real_cat = shutil.which("stat"), shutil.which("cat")
    lie = " | awk '{ $NF = $NF + 1; print }'" if stat_lies else ""
    run_stat = f'{real_stat} "$@"{lie}' if stat_lies else f'exec -a stat {real_stat} "$@"'
    (bin_dir / "stat").write_text(f"#!/bin/bash\necho stat >> {log}\n{run_stat}\n")
    (bin_dir / "cat").write_text(f'#!/bin/bash\necho cat >> {log}\nexec -a cat {real_cat} "$@"\n')
    for shim in ("stat", "cat"):
        (bin_dir / shim).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return log


def test_file_reads_in_one_batch_cost_one_stat_and_one_cat_and_read_as_if_alone(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """Four files read together (an empty one, bytes that are not text, a mode to read) and five that are not (a
    link, missing, a folder, a FIFO, a file under /proc): every result is what the command gives alone; the four
    cost one stat and one cat between them, and the positional parameters a guard sees are still none."""
    (tmp_path / "a").write_bytes(b"first\n")
    (tmp_path / "empty").write_bytes(b"")
    (tmp_path / "bytes").write_bytes(b"caf\xc3\xa9 \xff\x00 no newline")
    (tmp_path / "exec.sh").write_bytes(b"#!/bin/sh\n")
    (tmp_path / "exec.sh").chmod(0o750)
    (tmp_path / "link").symlink_to(tmp_path / "exec.sh")
    os.mkfifo(tmp_path / "fifo")
    together = [
        files.content.command(str(tmp_path / "a")),
        files.content_and_mode.command(str(tmp_path / "empty")),
        files.content.command(str(tmp_path / "bytes")),
        files.content_and_mode.command(str(tmp_path / "exec.sh")),
    ]
    alone = [
        files.content.command(str(tmp_path / "missing")),
        files.content_and_mode.command(str(tmp_path / "link")),  # a link's size is its target's
        files.content_and_mode.command(str(tmp_path)),
        files.mode.command(str(tmp_path / "fifo")),
        files.content.command("/proc/version"),
    ]
    commands = [alone[0], together[0], files.exists.command(str(tmp_path / "a")), *together[1:], *alone[1:]]
    commands.append('test "$#" = 0')
    host = local_host()
    expected = _alone(host, commands)
    log = _counting(tmp_path, monkeypatch)
    results = parse_batch(commands, *batched(host, commands))
    assert [(r.stdout, r.stderr, r.exit_code) if r else None for r in results] == expected
    assert expected[-1] == ("", "", 0)
    # one stat and one cat for the four; alone: the link's and the folder's stat and cat, the FIFO's stat,
    # /proc/version's cat
    assert sorted(log.read_text().split()) == ["cat"] * 4 + ["stat"] * 4


def test_file_reads_whose_bytes_do_not_match_their_sizes_are_not_taken(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """A file that grows between the group's stat and its cat: no file of the group is taken from it; the next
    batch of this process reads them alone, and the facts come out right."""
    for name in ("a", "b"):
        (tmp_path / name).write_text(f"{name}\n")
    keys = [(files.content, str(tmp_path / "a")), (files.content_and_mode, str(tmp_path / "b"))]
    commands = [k[0].command(*k[1:]) for k in keys]
    host = local_host()
    _counting(tmp_path, monkeypatch, stat_lies=True)
    assert parse_batch(commands, *batched(host, commands)) == [None, None]
    monkeypatch.undo()
    assert "gpuhost_g=" not in batch_command(commands)  # read alone from now on
    again = parse_batch(commands, *batched(host, commands))
    assert [(r.stdout, r.exit_code) if r else None for r in again] == [("a\n", 0), ("644\nb\n", 0)]
    assert host.fact(files.content, str(tmp_path / "a")) == "a\n"
    assert host.fact(files.content_and_mode, str(tmp_path / "b")) == ("b\n", 0o644)
