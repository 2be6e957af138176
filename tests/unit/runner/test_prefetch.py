"""Facts read ahead in one batched command per round: parsed exactly as if read one by one."""

from __future__ import annotations

import io
from pathlib import Path

from gpuhost.facts import files
from gpuhost.runner.prefetch import batch_command, parse_batch
from tests.support.local import local_host


def batched(host, commands: list[str]) -> bytes:  # noqa: ANN001
    sink = io.BytesIO()
    host.conn.run(batch_command(commands), check=False, stdout_sink=sink)
    return sink.getvalue()


def test_batch_keeps_each_commands_output_error_and_status(tmp_path: Path) -> None:
    commands = [
        "printf 'a\\nb'",
        "echo oops >&2; exit 3",
        "printf '@@gpuhost-fact@@ 0 9 x y\\n'",
        "true",
        "printf 'caf\\303\\251 \\377\\n\\n'; exit 44",
    ]
    host = local_host()
    results = parse_batch(commands, batched(host, commands))
    assert [(r.stdout, r.stderr, r.exit_code) for r in results if r] == [
        ("a\nb", "", 0),
        ("", "oops\n", 3),
        ("@@gpuhost-fact@@ 0 9 x y\n", "", 0),
        ("", "", 0),
        ("caf\u00e9 \ufffd\n\n", "", 44),
    ]


def test_a_cut_off_batch_reads_as_not_read() -> None:
    commands = ["echo a", "echo b"]
    whole = parse_batch(commands, batched(local_host(), commands))
    assert [r.stdout for r in whole if r] == ["a\n", "b\n"]
    cut = batched(local_host(), commands)[:-1]
    assert parse_batch(commands, cut)[1] is None
    assert parse_batch(commands, b"") == [None, None]


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
    for key, res in zip(keys, parse_batch(commands, batched(host, commands)), strict=True):
        assert res is not None
        host.store_result(key, res)
    assert host.conn.commands_run == before + 1
    assert host.fact(files.content, str(tmp_path / "f")) == "hello\n"
    assert host.fact(files.content, str(tmp_path / "missing")) is None
    assert host.fact(files.exists, str(tmp_path)) is True
    assert host.conn.commands_run == before + 1  # no further round trip
