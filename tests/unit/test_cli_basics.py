import subprocess
import sys
from pathlib import Path

from gpuhost import __version__

EXAMPLE = str(Path(__file__).resolve().parents[2] / "playbooks" / "example.yml")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuhost", *args], capture_output=True, text=True, timeout=60)


def test_version():
    r = run("--version")
    assert r.returncode == 0 and r.stdout.splitlines()[0] == f"gpuhost {__version__}"


def test_only_built_commands_exist():
    r = run("--help")
    assert r.returncode == 0
    for command in ("run", "facts", "provision", "verify", "lab", "bench", "doctor", "launch", "serve"):
        assert f" {command} " in r.stdout


def test_unknown_inventory_file_is_a_usage_error(tmp_path):
    r = run("run", EXAMPLE, "-i", str(tmp_path / "missing.yml"))
    assert r.returncode == 2 and "cannot read" in r.stderr


def test_bad_extra_var_is_a_usage_error(tmp_path):
    inv = tmp_path / "inv.yml"
    inv.write_text("nodes:\n  a: {address: 127.0.0.1, connection: local}\n")
    r = run("run", EXAMPLE, "-i", str(inv), "-e", "novalue")
    assert r.returncode == 2 and "-e:1" in r.stderr and "expects KEY=VALUE" in r.stderr
