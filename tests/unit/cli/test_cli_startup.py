"""The command line stays thin: importing it, or asking it for help, loads none of the heavy libraries."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("fabric", "paramiko", "pydantic", "proxmoxer", "jinja2", "cryptography", "invoke", "ruamel", "requests")

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
