"""Every ``--help`` page, walked: what it ends with, what it calls a value, what launch sglang offers."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from gpuhost.cli.app import _register, app

_register([])
runner = CliRunner()


def _commands(cmd: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, cmd
    for name, sub in sorted(getattr(cmd, "commands", {}).items()):
        if not sub.hidden:
            yield from _commands(sub, (*path, name))


PAGES = list(_commands(typer.main.get_command(app)))


def test_the_walk_reaches_every_command():
    leaves = {" ".join(p) for p, c in PAGES if not hasattr(c, "commands")}
    # a human's list of gpuhost's commands (README "Commands"); a new one must be added here and get a page
    assert leaves == {
        "bench sglang",
        "capture",
        "config",
        "doc",
        "doctor dmesg",
        "doctor nvidia-installer",
        "doctor sglang-log",
        "facts",
        "inventory",
        "lab down",
        "lab status",
        "lab up",
        "launch sglang",
        "provision host",
        "provision lxc",
        "provision vm",
        "run",
        "serve logs",
        "serve restart",
        "serve status",
        "serve stop",
        "shell",
        "tune sglang",
        "verify host",
        "verify lxc",
        "verify p2p",
        "verify serve",
        "verify vm",
    }


@pytest.mark.parametrize(("path", "cmd"), PAGES, ids=[" ".join(p) or "gpuhost" for p, _ in PAGES])
def test_every_help_page_names_values_and_ends_with_exit_codes_and_an_example(path: tuple[str, ...], cmd: Any):
    r = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "120"})
    assert r.exit_code == 0, r.output
    # a value is named by what it is (FILE, N, LIMIT), not by its Python type
    assert not re.search(r"<(str|int|float|path|int range|float range|bool)>", r.output), r.output
    if hasattr(cmd, "commands"):
        return
    page = " ".join(r.output.split())
    assert re.search(r"\bExit( status:)? 0\b", page), page
    assert re.search(r"\b2 (on )?(bad|unreadable) input\b|\b2 cannot run\b|\b2 no lab\b", page), page
    assert re.search(r"Examples?: [^.]*?gpuhost " + " ".join(path), page), page


def test_launch_sglang_offers_no_reboot_and_says_what_a_restart_restarts():
    page = " ".join(runner.invoke(app, ["launch", "sglang", "--help"], env={"COLUMNS": "120"}).output.split())
    assert "--allow-reboot" not in page and "--reboot-serving" not in page
    assert "--allow-restart Restart a running SGLang server (or gateway) whose configuration changed" in page
    assert "containers whose devices changed" not in page
    # the playbook commands keep both, with the container meaning
    run = " ".join(runner.invoke(app, ["provision", "lxc", "--help"], env={"COLUMNS": "120"}).output.split())
    assert "--allow-reboot" in run and "--allow-restart Restart running containers whose devices changed" in run
