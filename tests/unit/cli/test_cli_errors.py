"""The one error handler: gpuhost errors exit with their code and no traceback; bugs are one line."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gpuhost.cli.app import app, main
from gpuhost.cli.failures import INTERNAL_ERROR
from gpuhost.errors import CommandFailed, UsageError


@pytest.fixture
def boom() -> Iterator[None]:
    def _boom(kind: str = "internal") -> None:
        if kind == "usage":
            raise UsageError("--thing: not a thing")
        if kind == "command":
            raise CommandFailed("false", 3, host="pve1")
        raise RuntimeError("kaput\nsecond line")

    app.command("boom", hidden=True)(_boom)
    added = app.registered_commands[-1]
    yield
    app.registered_commands.remove(added)


def _main(*args: str) -> int:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    return int(exc.value.code or 0)


@pytest.mark.parametrize(
    ("kind", "code", "message"),
    [
        ("usage", 2, "error: --thing: not a thing"),
        ("command", 1, "error: pve1: command failed (exit 3): false"),
    ],
)
def test_gpuhost_error_exits_with_its_code_and_no_traceback(
    boom: None, capsys: pytest.CaptureFixture[str], kind: str, code: int, message: str
) -> None:
    assert _main("boom", "--kind", kind) == code
    err = capsys.readouterr().err
    assert err.strip() == message
    assert "Traceback" not in err


def test_other_exception_is_one_line_without_traceback(boom: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert _main("boom") == INTERNAL_ERROR
    err = capsys.readouterr().err
    assert err.splitlines() == ["internal error: RuntimeError: kaput second line (run with --debug for the traceback)"]


def test_debug_shows_the_traceback(boom: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert _main("--debug", "boom") == INTERNAL_ERROR
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "_boom" in err
    assert err.splitlines()[-1] == "internal error: RuntimeError: kaput second line"


def test_debug_does_not_stick_to_the_next_run(boom: None, capsys: pytest.CaptureFixture[str]) -> None:
    _main("--debug", "boom")
    capsys.readouterr()
    _main("boom")
    assert "Traceback" not in capsys.readouterr().err
