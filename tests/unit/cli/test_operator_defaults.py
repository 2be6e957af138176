"""Defaults and comfort: gpuhost.toml and GPUHOST_* variables, help pages, shell completion."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
BOOK = "- name: p\n  hosts: all\n  tasks:\n    - command: {cmd: 'true'}\n"


def gpuhost(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("GPUHOST_")}
    return subprocess.run(
        [sys.executable, "-m", "gpuhost", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**base, "PYTHONPATH": str(REPO / "src"), "XDG_CONFIG_HOME": str(cwd / "xdg"), **(env or {})},
        timeout=60,
    )


def project(tmp_path: Path) -> Path:
    (tmp_path / "inv").mkdir()
    (tmp_path / "inv" / "site.yml").write_text("nodes:\n  pve1: {address: 127.0.8.1}\n  pve2: {address: 127.0.8.2}\n")
    (tmp_path / "other.yml").write_text("nodes:\n  solo: {address: 127.0.8.3}\n")
    (tmp_path / "book.yml").write_text(BOOK)
    (tmp_path / "sub").mkdir()
    return tmp_path


def test_project_file_names_the_inventory_env_overrides_it(tmp_path):
    root = project(tmp_path)
    (root / "gpuhost.toml").write_text('inventory = "inv/site.yml"\nforks = 4\n')
    r = gpuhost("run", "../book.yml", "--list-hosts", cwd=root / "sub")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1:] == ["  pve1", "  pve2"]
    r = gpuhost("run", "book.yml", "--list-hosts", cwd=root, env={"GPUHOST_INVENTORY": str(root / "other.yml")})
    assert r.stdout.splitlines()[1:] == ["  solo"]
    r = gpuhost("run", "book.yml", "--list-hosts", "-i", "other.yml", cwd=root, env={"GPUHOST_INVENTORY": "nope"})
    assert r.stdout.splitlines()[1:] == ["  solo"], "a flag wins over the environment"


def test_user_file_applies_when_the_project_has_none(tmp_path):
    root = project(tmp_path)
    (root / "xdg" / "gpuhost").mkdir(parents=True)
    (root / "xdg" / "gpuhost" / "gpuhost.toml").write_text(f'inventory = "{root / "other.yml"}"\n')
    r = gpuhost("run", "book.yml", "--list-hosts", cwd=root)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1:] == ["  solo"]


def test_bad_config_names_file_line_and_key(tmp_path):
    root = project(tmp_path)
    (root / "gpuhost.toml").write_text('inventory = "inv/site.yml"\nforkz = 4\n')
    r = gpuhost("run", "book.yml", "--list-hosts", cwd=root)
    assert r.returncode == 2
    assert f"{root / 'gpuhost.toml'}:2: field 'forkz': unknown key" in r.stderr
    (root / "gpuhost.toml").write_text('output = "yaml"\n')
    r = gpuhost("run", "book.yml", "--list-hosts", cwd=root)
    assert r.returncode == 2 and "gpuhost.toml:1: field 'output': must be one of text, json, json-events" in r.stderr
    (root / "gpuhost.toml").write_text("forks = [\n")
    r = gpuhost("--help", cwd=root)
    assert r.returncode == 2 and "gpuhost.toml" in r.stderr and "invalid TOML" in r.stderr


def test_help_has_no_bool_noise_and_an_example(tmp_path):
    for cmd in (["run"], ["shell"], ["inventory"], ["provision", "host"], ["provision", "lxc"], ["facts"]):
        r = gpuhost(*cmd, "--help", cwd=tmp_path, env={"COLUMNS": "120"})
        assert r.returncode == 0, r.stderr
        assert "<bool>" not in r.stdout, cmd
        assert not any("\u2500" <= c <= "\u257f" for c in r.stdout), "box drawing in piped help"
        assert "Example: gpuhost " + " ".join(cmd) in r.stdout, cmd


def test_piped_usage_error_is_plain(tmp_path):
    r = gpuhost("run", "x.yml", cwd=tmp_path)
    assert r.returncode == 2 and "Missing option '-i' / '--inventory'" in r.stderr
    assert not any("\u2500" <= c <= "\u257f" for c in r.stderr)


def test_shell_completion_is_on(tmp_path):
    r = gpuhost("--help", cwd=tmp_path)
    assert "--install-completion" in r.stdout and "--show-completion" in r.stdout
    r = gpuhost("--show-completion", "bash", cwd=tmp_path)
    assert r.returncode == 0 and "complete" in r.stdout and "COMPLETE" in r.stdout
