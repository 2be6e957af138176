"""The command line stays thin: importing it, or asking it for help, loads none of the heavy libraries."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = (
    "fabric",
    "paramiko",
    "pydantic",
    "proxmoxer",
    "jinja2",
    "cryptography",
    "invoke",
    "ruamel",
    "requests",
    "click",
)

_PROBE = """
import json, sys
{setup}
print(json.dumps(sorted({{m.split(".")[0] for m in sys.modules}} & set({heavy!r}))))
"""


def _heavy_after(setup: str) -> list[str]:
    code = _PROBE.format(setup=setup, heavy=HEAVY)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_importing_the_app_loads_no_heavy_library() -> None:
    assert _heavy_after("import gpuhost.cli.app") == []


def test_registering_every_command_loads_no_heavy_library() -> None:
    assert _heavy_after("from gpuhost.cli.app import _register\n_register()") == []


def test_help_and_version_load_no_heavy_library() -> None:
    for flag in ("--help", "--version"):
        setup = f"from gpuhost.cli.app import main\ntry:\n    main([{flag!r}])\nexcept SystemExit:\n    pass"
        assert _heavy_after(setup) == [], flag


def test_package_faces_load_lazily_and_still_export_their_names() -> None:
    setup = "import gpuhost.connection, gpuhost.inventory, gpuhost.runner, gpuhost.playbook, gpuhost.runner.results"
    assert _heavy_after(setup) == []
    from gpuhost.connection.local import LocalConnection  # noqa: F401
    from gpuhost.connection.ssh import SSHConnection  # noqa: F401
    from gpuhost.core.task import Task  # noqa: F401
    from gpuhost.inventory.loader import load_inventory  # noqa: F401
    from gpuhost.inventory.models import NodeSpec  # noqa: F401
    from gpuhost.playbook.loader import load_playbook  # noqa: F401
    from gpuhost.runner.connect import open_connection  # noqa: F401
    from gpuhost.runner.run import RunOptions, run_playbook  # noqa: F401


def _gpuhost(*args: str, cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuhost", *args], capture_output=True, text=True, timeout=60, cwd=cwd, check=False
    )


def test_the_program_keeps_exit_codes_and_output_when_it_skips_the_teardown(tmp_path) -> None:  # noqa: ANN001
    """``console`` ends the process with os._exit: the exit code, the whole output and files closed by
    exit handlers must survive it."""
    ok = _gpuhost("--version")
    assert ok.returncode == 0 and ok.stdout.startswith("gpuhost ")
    inv = tmp_path / "inv.yml"
    inv.write_text("nodes:\n  pve1: {address: 127.0.0.1, colour: blue}\n")
    bad = _gpuhost("inventory", "-i", str(inv), "--graph")
    assert bad.returncode == 2
    assert f"{inv}:2" in bad.stderr and "colour" in bad.stderr and "Traceback" not in bad.stderr
    usage = _gpuhost("run")
    assert usage.returncode == 2 and "Missing argument" in usage.stderr


def test_an_exit_handler_still_runs_before_the_process_ends(tmp_path) -> None:  # noqa: ANN001
    out = tmp_path / "written-at-exit"
    code = (
        "import atexit, sys; from pathlib import Path; "
        f"atexit.register(lambda: Path({str(out)!r}).write_text('flushed')); "
        "sys.argv = ['gpuhost', '--version']; "
        "from gpuhost.cli.app import console; console()"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0 and r.stdout.startswith("gpuhost ")
    assert out.read_text() == "flushed"


_RUN_WITHOUT_SCAN = """
import json, os, sys
from gpuhost.cli.app import _no_plugin_scan
os.environ["PYDANTIC_DISABLE_PLUGINS"] = "__all__"
_no_plugin_scan()
from pydantic import BaseModel, ValidationError
class M(BaseModel):
    n: int
ok = M.model_validate({"n": "3"}).n
try:
    M.model_validate({"n": "x"})
    refused = False
except ValidationError:
    refused = True
print(json.dumps([ok, refused, "importlib.metadata" in sys.modules]))
"""


def test_models_validate_as_before_without_pydantics_plugin_scan() -> None:
    """With every plugin disabled the plugin loader is replaced by its answer (no plugins): models validate and
    refuse as ever, and importlib.metadata (pydantic's entry-point scan) is never imported."""
    r = subprocess.run([sys.executable, "-c", _RUN_WITHOUT_SCAN], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [3, True, False]


def test_pydantics_own_loader_answers_no_plugins_when_all_are_disabled() -> None:
    """What the stand-in replaces: the real loader, with PYDANTIC_DISABLE_PLUGINS=__all__, gives no plugins."""
    code = (
        "import os; os.environ['PYDANTIC_DISABLE_PLUGINS'] = '__all__'\n"
        "from pydantic.plugin._loader import get_plugins; print(list(get_plugins()))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr
