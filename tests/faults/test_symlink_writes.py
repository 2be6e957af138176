"""``copy`` and ``template`` onto a symbolic link, through the operations as a playbook runs them: the link
stays a link and its target gets the content; a second run finds both converged."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.faults.conftest import gpuhost

pytestmark = pytest.mark.faults


def test_copy_and_template_write_through_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "a.conf").write_text("old a\n")
    (real / "b.conf").write_text("old b\n")
    os.chmod(real / "b.conf", 0o640)
    (tmp_path / "a.link").symlink_to(real / "a.conf")
    (tmp_path / "b.link").symlink_to("real/b.conf")  # a relative link
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "b.j2").write_text("b for {{ inventory_hostname }}\n")
    book = tmp_path / "play.yml"
    book.write_text(
        f"""
- hosts: all
  tasks:
    - name: a through its link
      copy: {{dest: "{tmp_path}/a.link", content: "new a\\n"}}
    - name: b through its link
      template: {{src: b.j2, dest: "{tmp_path}/b.link"}}
"""
    )
    inv = tmp_path / "inventory.yml"
    inv.write_text("nodes:\n  here:\n    address: 127.0.0.1\n    connection: local\n")

    first = json.loads(gpuhost("run", str(book), "-i", str(inv), "--json", "--diff").stdout)
    assert [t["status"] for t in first["tasks"]] == ["changed", "changed"], first["tasks"]
    assert (tmp_path / "a.link").is_symlink() and (tmp_path / "b.link").is_symlink()
    assert os.readlink(tmp_path / "b.link") == "real/b.conf"
    assert (real / "a.conf").read_text() == "new a\n"
    assert (real / "b.conf").read_text() == "b for here\n"
    assert (real / "b.conf").stat().st_mode & 0o777 == 0o640  # the target keeps its mode
    assert "-old a" in first["tasks"][0]["diff"] and "+new a" in first["tasks"][0]["diff"]
    assert sorted(p.name for p in tmp_path.iterdir() if ".gpuhost-" in p.name) == []

    again = json.loads(gpuhost("run", str(book), "-i", str(inv), "--json").stdout)
    assert [t["status"] for t in again["tasks"]] == ["ok", "ok"], again["tasks"]
