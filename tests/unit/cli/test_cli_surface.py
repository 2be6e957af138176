"""What the command line offers: every command in --help, the shared run flags, --version, -v."""

from __future__ import annotations

import io
import logging
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from gpuhost import __version__
from gpuhost.cli import verbose
from gpuhost.cli.app import _register, app
from gpuhost.cli.flags import RunFlags
from gpuhost.redact import forget_all, register_secret

_register([])  # every command module, whatever this process was started with

SHARED = {
    "--check",
    "--diff",
    "--limit",
    "--tags",
    "--skip-tags",
    "--forks",
    "--allow-reboot",
    "--allow-restart",
    "--json",
    "--extra-vars",
    "--verbose",
}


def _gpuhost(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuhost", *args], capture_output=True, text=True, timeout=60)


def test_help_lists_every_command() -> None:
    root = typer.main.get_command(app)
    r = _gpuhost("--help")
    assert r.returncode == 0, r.stderr
    names = [name for name, cmd in root.commands.items() if not cmd.hidden]  # type: ignore[attr-defined]
    assert {"run", "facts", "lab", "provision", "verify"} <= set(names)
    for name in names:
        assert f" {name} " in r.stdout, name
    for flag in ("--version", "--debug"):
        assert flag in r.stdout


def test_version_names_gpuhost_python_paramiko_and_proxmoxer() -> None:
    r = _gpuhost("--version")
    assert r.returncode == 0
    assert r.stdout.splitlines() == [
        f"gpuhost {__version__}",
        f"Python {sys.version.split()[0]}",
        f"paramiko {version('paramiko')}",
        f"proxmoxer {version('proxmoxer')}",
    ]


def _options(*path: str) -> set[str]:
    cmd: Any = typer.main.get_command(app)
    for name in path:
        cmd = cmd.commands[name]
    return {opt for p in cmd.params for opt in p.opts if opt.startswith("--")}


@pytest.mark.parametrize("path", [("run",), ("provision", "host"), ("provision", "lxc")])
def test_playbook_commands_share_one_set_of_run_flags(path: tuple[str, ...]) -> None:
    assert SHARED <= _options(*path)


def test_shared_flags_reach_the_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[tuple[Path, RunFlags, Any]] = []

    def fake(playbook: Path, inventory: Path, flags: RunFlags, presets: Any = (), **_kw: Any) -> int:
        seen.append((playbook, flags, presets))
        return 0

    monkeypatch.setattr("gpuhost.cli.playbook_commands.run_with_flags", fake)
    monkeypatch.setattr("gpuhost.cli.provision.run_with_flags", fake)
    runner = CliRunner()
    inv = str(tmp_path / "inv.yml")
    r = runner.invoke(
        app,
        [
            "run",
            "book.yml",
            "-i",
            inv,
            "--check",
            "--diff",
            "-l",
            "pve1",
            "-t",
            "a",
            "-t",
            "b",
            "--skip-tags",
            "c",
            "-f",
            "3",
            "--allow-reboot",
            "--json",
            "-e",
            "k=v",
            "-v",
        ],
    )
    assert r.exit_code == 0, r.output
    assert seen[-1][1] == RunFlags(
        check=True,
        diff=True,
        limit="pve1",
        tags=["a", "b"],
        skip_tags=["c"],
        forks=3,
        allow_reboot=True,
        as_json=True,
        extra_vars=["k=v"],
        verbose=True,
    )
    r = runner.invoke(app, ["provision", "lxc", "-i", inv, "--ctid", "200", "--allow-restart"])
    assert r.exit_code == 0, r.output
    playbook, flags, preset = seen[-1]
    assert playbook.name == "provision-lxc.yml" and flags == RunFlags(allow_restart=True)
    assert [(p.var, p.value, p.flag) for p in preset] == [("lxc_ctids", [200], "--ctid")]
    r = runner.invoke(app, ["provision", "host", "-i", inv])
    assert r.exit_code == 0 and seen[-1][0].name == "provision-host.yml" and seen[-1][1] == RunFlags()


def test_verbose_handler_prints_one_redacted_line_per_remote_command() -> None:
    out = io.StringIO()
    verbose.enable(out)
    register_secret("s3cr3t-token-value")
    try:
        log = logging.getLogger("gpuhost.remote")
        log.debug(
            "%s", "pveversion", extra={"host": "pve1", "command": "pveversion", "exit_code": 0, "duration": 0.0123}
        )
        cmd = "curl -H 'Authorization: s3cr3t-token-value' https://x\necho second"
        log.debug("%s", cmd, extra={"host": "pve2", "command": cmd, "exit_code": 7, "duration": 1.5})
    finally:
        verbose.disable()
        forget_all()
    assert out.getvalue().splitlines() == [
        "[pve1] 0.012s rc=0 $ pveversion",
        "[pve2] 1.500s rc=7 $ curl -H 'Authorization: ********' https://x … (+1 lines)",
    ]


def test_verbose_is_off_unless_asked() -> None:
    verbose.disable()
    assert not logging.getLogger("gpuhost.remote").isEnabledFor(logging.DEBUG)
