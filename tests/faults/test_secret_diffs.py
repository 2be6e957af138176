"""A rotated secret never shows in ``--diff``, old or new, in text or JSON: files rendered with
``secret_env``/``secret_file``, or written with mode 0600/0400, show "content changed (secret)"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.faults

SRC = str(Path(__file__).resolve().parents[2] / "src")
OLD, NEW = "old-token-4f1c9e", "new-token-8a2d7b"


def gpuhost(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "COLUMNS": "200", "PYTHONPATH": SRC, **env}
    return subprocess.run(
        [sys.executable, "-m", "gpuhost", *args], capture_output=True, text=True, env=full, timeout=120
    )


def setup(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "env.j2").write_text("TOKEN={{ secret_env('GPUHOST_TEST_TOKEN') }}\n")
    (tmp_path / "token.env").write_text(f"TOKEN={OLD}\n")  # the token before rotation, mode 0644 (not secret)
    (tmp_path / "private.conf").write_text(f"key={OLD}\n")
    book = tmp_path / "play.yml"
    book.write_text(
        f"""
- hosts: all
  tasks:
    - name: rendered with a secret
      template: {{src: env.j2, dest: "{tmp_path}/token.env"}}
    - name: a 0600 file
      copy: {{dest: "{tmp_path}/private.conf", content: "key=rotated-by-hand\\n", mode: "0600"}}
    - name: a plain file
      copy: {{dest: "{tmp_path}/plain.conf", content: "visible=yes\\n"}}
"""
    )
    inv = tmp_path / "inventory.yml"
    inv.write_text("nodes:\n  h1:\n    address: 127.0.0.1\n    connection: local\n")
    return book, inv


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_rotated_secret_shows_neither_value(tmp_path, fmt):
    book, inv = setup(tmp_path)
    args = ["run", str(book), "-i", str(inv), "--check", "--diff"] + (["--json"] if fmt == "json" else [])
    r = gpuhost(*args, env={"GPUHOST_TEST_TOKEN": NEW})
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout + r.stderr
    assert OLD not in out and NEW not in out and "rotated-by-hand" not in out
    assert out.count("content changed (secret)") == 2
    assert "+visible=yes" in out  # an ordinary file still shows its diff
    if fmt == "json":
        diffs = {t["task"]: t["diff"] for t in json.loads(r.stdout)["tasks"]}
        assert "content changed (secret)" in diffs["rendered with a secret"]
        assert "content changed (secret)" in diffs["a 0600 file"]


def test_secret_file_is_written_0600_and_holds_the_new_value(tmp_path):
    book, inv = setup(tmp_path)
    r = gpuhost("run", str(book), "-i", str(inv), "--diff", env={"GPUHOST_TEST_TOKEN": NEW})
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "token.env").read_text() == f"TOKEN={NEW}\n"
    assert oct((tmp_path / "private.conf").stat().st_mode & 0o777) == "0o600"
    assert OLD not in r.stdout + r.stderr and NEW not in r.stdout + r.stderr
