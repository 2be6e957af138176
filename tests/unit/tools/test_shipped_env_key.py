"""The probes read their API key from the env file, as imported here and as shipped (one file, no gpuhost).

``read_tool`` ships each probe as one file with the code it shares (``tools/envfile.py``) put in place of its
import; the shipped text is run here by a bare ``python3 -I -S`` from an empty folder, where no gpuhost is.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuhost.resources import read_tool
from gpuhost.tools import gateway_probe, serve_probe

#: (env file text, the key the SGLang probe sends, the key the gateway probe sends), as a reading of their code
CASES = [
    ("# gpuhost\nSGLANG_API_KEY=sk-one\nSMG_API_KEY=sk-two\n", "sk-one", "sk-two"),
    ('SGLANG_API_KEY="sk-quoted"\nSMG_API_KEY="sk-q"\n', "sk-quoted", '"sk-q"'),
    ("SGLANG_API_KEY =  sk-spaced \nSMG_API_KEY = sk-s\n", "sk-spaced", None),
    ("SGLANG_API_KEY=\nSMG_API_KEY=\n", None, ""),
    ("OTHER=1\nno equals sign\n", None, None),
]


def _shipped_keys(tool: str, env_file: str, folder: Path) -> object:
    code = (
        "import json\n"
        "shipped = {'__name__': 'shipped'}\n"
        f"exec(compile({read_tool(tool)!r}, {tool!r}, 'exec'), shipped)\n"
        f"print(json.dumps(shipped['api_key']({env_file!r})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], cwd=folder, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize(("text", "sglang_key", "smg_key"), CASES)
def test_the_probes_read_their_key_from_the_env_file(
    tmp_path: Path, text: str, sglang_key: str | None, smg_key: str | None
) -> None:
    env = tmp_path / "sglang.env"
    env.write_text(text)
    assert serve_probe.api_key(str(env)) == sglang_key
    assert gateway_probe.api_key(str(env)) == smg_key
    bare = tmp_path / "bare"
    bare.mkdir()
    assert _shipped_keys("serve_probe.py", str(env), bare) == sglang_key
    assert _shipped_keys("gateway_probe.py", str(env), bare) == smg_key


def test_no_env_file_or_an_unreadable_one_gives_no_key(tmp_path: Path) -> None:
    for missing in (None, "", str(tmp_path / "absent.env"), str(tmp_path)):
        assert serve_probe.api_key(missing) is None
        assert gateway_probe.api_key(missing) is None
    assert _shipped_keys("serve_probe.py", str(tmp_path / "absent.env"), tmp_path) is None
    assert _shipped_keys("gateway_probe.py", str(tmp_path), tmp_path) is None


@pytest.mark.parametrize("tool", ["serve_probe.py", "gateway_probe.py"])
def test_a_shipped_probe_is_one_python_3_8_file_that_imports_nothing_of_gpuhost(tool: str) -> None:
    tree = ast.parse(read_tool(tool), feature_version=(3, 8))
    imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert [m for m in imported if m and m.startswith("gpuhost")] == []
    assert "def env_lines(" in read_tool(tool)
