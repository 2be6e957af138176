"""An unexpected exception in one host (from its own variables) fails that host only: the other hosts
finish, and the recap and ``--json`` report always print (issue #12)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.faults

SRC = str(Path(__file__).resolve().parents[2] / "src")


def gpuhost(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "PYTHONPATH": SRC}
    return subprocess.run(
        [sys.executable, "-m", "gpuhost", *args], capture_output=True, text=True, env=env, timeout=120
    )


def setup(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "templates").mkdir()
    # a per-host divisor: 0 on the bad host raises ZeroDivisionError inside Jinja, which nothing expects
    (tmp_path / "templates" / "ratio.j2").write_text("ratio={{ 100 // divisor }}\n")
    book = tmp_path / "play.yml"
    book.write_text(
        f"""
- hosts: all
  tasks:
    - name: ratio file
      template: {{src: ratio.j2, dest: "{tmp_path}/{{{{ inventory_hostname }}}}.ratio"}}
    - name: after
      command: {{cmd: "touch {tmp_path}/{{{{ inventory_hostname }}}}.after"}}
"""
    )
    inv = tmp_path / "inventory.yml"
    lines = ["nodes:"]
    for name, divisor in (("good1", 4), ("bad", 0), ("good2", 5)):
        lines += [f"  {name}:", "    address: 127.0.0.1", "    connection: local", f"    vars: {{divisor: {divisor}}}"]
    inv.write_text("\n".join(lines) + "\n")
    return book, inv


def test_exception_in_one_hosts_vars_leaves_the_others_json_intact(tmp_path):
    book, inv = setup(tmp_path)
    r = gpuhost("run", str(book), "-i", str(inv), "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert set(report["hosts"]) == {"good1", "bad", "good2"}
    for good in ("good1", "good2"):
        assert report["hosts"][good]["failed"] == 0 and report["hosts"][good]["changed"] == 2
        assert (tmp_path / f"{good}.after").exists()
    assert (tmp_path / "good1.ratio").read_text() == "ratio=25\n"
    assert report["hosts"]["bad"]["failed"] == 1
    failed = [t for t in report["tasks"] if t["status"] == "failed"]
    assert [t["host"] for t in failed] == ["bad"]
    assert "ZeroDivisionError" in failed[0]["error"]
    assert not (tmp_path / "bad.ratio").exists() and not (tmp_path / "bad.after").exists()


def test_exception_in_one_hosts_vars_still_prints_the_recap(tmp_path):
    book, inv = setup(tmp_path)
    r = gpuhost("run", str(book), "-i", str(inv))
    assert r.returncode == 1
    assert "Traceback" not in r.stdout + r.stderr
    # piped output: the recap is a plain table (host, ok, changed, failed, skipped, note)
    recap = r.stdout[r.stdout.rindex("recap") :].splitlines()
    rows = {
        cols[0]: cols for cols in (line.split() for line in recap[2:]) if cols and cols[0] in {"good1", "bad", "good2"}
    }
    assert set(rows) == {"good1", "bad", "good2"}, recap
    assert rows["good2"][1:4] == ["0", "2", "0"]
    assert rows["bad"][1:4] == ["0", "0", "1"]
    assert "ZeroDivisionError" in r.stdout
