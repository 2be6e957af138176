"""paramiko, imported without invoke until an SSH config needs it.

paramiko's ``config`` module imports ``invoke`` whenever it is installed (here it is, as fabric's
dependency), and invoke imports asyncio and unittest.mock: about 60 ms of a converged run's start-up
on this project's machines. paramiko uses invoke for one thing only, ``Match exec`` in an SSH config
file, and raises the saved ImportError when it meets one. So gpuhost imports paramiko with invoke
hidden and, when a config file's ``Match exec`` asks for it, loads invoke into paramiko then
(:func:`with_match_exec`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

_hidden = "invoke" not in sys.modules and "paramiko" not in sys.modules
if _hidden:
    sys.modules["invoke"] = None  # type: ignore[assignment]  # an import of it raises ImportError
try:
    import paramiko
    import paramiko.config
finally:
    if _hidden:
        del sys.modules["invoke"]

__all__ = ["paramiko", "with_match_exec"]

T = TypeVar("T")


def with_match_exec(call: Callable[[], T]) -> T:
    """``call()``; when it needs invoke for a ``Match exec`` line, load invoke into paramiko and call again."""
    try:
        return call()
    except ImportError:
        if paramiko.config.invoke is not None:
            raise
        import invoke

        paramiko.config.invoke = invoke
        return call()
