"""Where gpuhost's own playbooks and templates live.

In a source checkout (the usual, ``pip install -e .``) they are the repository's top-level
``playbooks/`` and ``templates/``; an installed wheel carries them under
``<prefix>/share/gpuhost/``.
"""

from __future__ import annotations

import base64
import re
import shlex
import sys
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[2]


def _find(name: str) -> Path | None:
    for candidate in (_CHECKOUT / name, Path(sys.prefix) / "share" / "gpuhost" / name):
        if candidate.is_dir():
            return candidate
    return None


def builtin_templates_dir() -> Path | None:
    return _find("templates")


def builtin_playbooks_dir() -> Path | None:
    return _find("playbooks")


#: a shipped program's one-line import of another module of :mod:`gpuhost.tools` (stdlib-only code they share)
_SHARED_IMPORT = re.compile(r"^from gpuhost\.tools\.(\w+) import [\w, ]+$", re.MULTILINE)
_FUTURE_IMPORT = re.compile(r"^from __future__ import .*\n", re.MULTILINE)


def read_tool(name: str) -> str:
    """The source of a program in :mod:`gpuhost.tools`, to ship to a target as one file: each
    ``from gpuhost.tools.MODULE import ...`` line in it is replaced by that module's code (its
    ``__future__`` imports left out: the program has its own at its top)."""
    from importlib.resources import files

    def shared(match: re.Match[str]) -> str:
        code = (files("gpuhost.tools") / f"{match.group(1)}.py").read_text()
        return _FUTURE_IMPORT.sub("", code).rstrip("\n")

    return _SHARED_IMPORT.sub(shared, (files("gpuhost.tools") / name).read_text())


def tool_command(python: str, tool: str, args: list[str]) -> str:
    """``PYTHON -c`` with a shipped tool's source (base64, so no quoting can break it) and its arguments."""
    src = base64.b64encode(read_tool(tool).encode()).decode()
    code = f"import base64,sys;sys.argv=[{tool!r}]+sys.argv[1:];exec(base64.b64decode('{src}'))"
    return f"{shlex.quote(python)} -c {shlex.quote(code)} {shlex.join(args)}"
