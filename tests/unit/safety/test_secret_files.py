"""A copy or template is secret when its content uses a secret or the file there is private, not only when its
``mode:`` says so; a secret file's backups are kept to a few (issue 31, item 3)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuhost.inventory.loader import load_inventory
from gpuhost.playbook.loader import load_playbook
from gpuhost.runner.apply import SECRET_BACKUPS
from gpuhost.runner.run import RunOptions, run_playbook
from tests.support.local import local_inventory

OLD = "old-key-3c1d9e0f55aa"


def _run(tmp_path: Path, task: str, *, check: bool = True) -> str:
    book = tmp_path / "play.yml"
    book.write_text(f"- hosts: all\n  tasks:\n    - {task}\n")
    report = run_playbook(
        load_playbook(book), load_inventory(local_inventory(tmp_path, ["h1"])), RunOptions(check=check)
    )
    assert report.exit_code == 0, [r.error for r in report.results]
    return "\n".join(r.diff + r.reason for r in report.results)


def test_editing_a_private_file_without_mode_shows_no_text(tmp_path: Path) -> None:
    f = tmp_path / "token"
    f.write_text(f"{OLD}\n")
    f.chmod(0o600)
    shown = _run(tmp_path, f"copy: {{dest: {f}, content: 'new-key-aa11bb22cc33\\n'}}")
    assert OLD not in shown and "new-key" not in shown and "secret" in shown


def test_a_link_to_a_private_file_shows_no_text(tmp_path: Path) -> None:
    target = tmp_path / "real-token"
    target.write_text(f"{OLD}\n")
    target.chmod(0o600)
    link = tmp_path / "token"
    link.symlink_to(target)
    shown = _run(tmp_path, f"copy: {{dest: {link}, content: 'new-key-aa11bb22cc33\\n'}}")
    assert OLD not in shown and "new-key" not in shown


def test_a_rotated_secret_in_a_copy_without_mode_shows_neither_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = tmp_path / "app.env"
    f.write_text(f"KEY={OLD}\n")
    f.chmod(0o644)
    monkeypatch.setenv("GPUHOST_TEST_ROTATED", "rotated-key-77ee99dd00")
    shown = _run(tmp_path, f"copy: {{dest: {f}, content: \"KEY={{{{ secret_env('GPUHOST_TEST_ROTATED') }}}}\\n\"}}")
    assert OLD not in shown and "rotated-key" not in shown and "secret" in shown


def test_a_plain_file_still_shows_its_diff(tmp_path: Path) -> None:
    f = tmp_path / "motd"
    f.write_text("hello\n")
    f.chmod(0o644)
    shown = _run(tmp_path, f"copy: {{dest: {f}, content: 'hello world\\n'}}")
    assert "-hello" in shown and "+hello world" in shown


def test_a_secret_file_keeps_only_a_few_backups(tmp_path: Path) -> None:
    f = tmp_path / "sglang.env"
    for i in range(SECRET_BACKUPS + 3):
        _run(
            tmp_path, f"copy: {{dest: {f}, mode: '0600', content: 'SGLANG_API_KEY=key-number-{i:04d}\\n'}}", check=False
        )
    backups = [p for p in os.listdir(tmp_path) if p.startswith("sglang.env.") and p.endswith("gpuhost~")]
    assert len(backups) == SECRET_BACKUPS, backups
    kept = "".join((tmp_path / b).read_text() for b in backups)
    assert "key-number-0000" not in kept and f"key-number-{SECRET_BACKUPS + 1:04d}" in kept


def test_a_line_edit_of_a_private_file_shows_no_text(tmp_path: Path) -> None:
    f = tmp_path / "credentials"
    f.write_text(f"token={OLD}\n")
    f.chmod(0o600)
    shown = _run(tmp_path, f"line: {{path: {f}, line: 'user=gpuhost'}}")
    assert OLD not in shown and "user=gpuhost" not in shown and "secret" in shown
