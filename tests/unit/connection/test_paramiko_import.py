"""paramiko comes in without invoke (start-up time), and an SSH config's ``Match exec`` still works."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[3] / "src")


def test_connecting_code_does_not_import_invoke():
    code = "import sys, gpuhost.connection.ssh, gpuhost.connection.sshconfig; print('invoke' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], env={"PYTHONPATH": SRC}, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


def test_match_exec_in_ssh_config_is_evaluated(tmp_path):
    cfg = tmp_path / "config"
    cfg.write_text(
        textwrap.dedent(
            """\
            Match host gpu1 exec "test -e {flag}"
                HostName 127.0.9.21
            Host gpu1
                User ops
            """
        ).format(flag=tmp_path / "flag")
    )
    # in a process of its own: invoke runs the exec command with the process's stdin, which pytest replaces
    code = (
        "import sys; from gpuhost.connection.sshconfig import lookup; "
        "o = lookup(sys.argv[1], 'gpu1', 'gpu1'); print(o.hostname, o.user)"
    )

    def found() -> str:
        return subprocess.run(
            [sys.executable, "-c", code, str(cfg)],
            env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

    assert found() == "None ops"  # the exec command fails: the Match block does not apply
    (tmp_path / "flag").touch()
    assert found() == "127.0.9.21 ops"
