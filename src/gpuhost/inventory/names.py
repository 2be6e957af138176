"""Names that become paths, shell words or unit lines: one rule for all of them.

A profile name ends up in ``/opt/gpuhost/venvs/NAME``, in ``sh install.sh``, in the unit's ``Description=``;
a node name in recap rows, run-log paths and lock files. Such a name is letters, digits, ``.``, ``_`` and
``-``, starts with a letter or digit, has no ``..`` and at most 100 characters: no ``$(…)``, no newline, no
way out of its folder. An environment variable name is a C identifier; a value written to an env file or a unit
has no control character.
"""

from __future__ import annotations

import re

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def safe_name(value: str, what: str = "name") -> str:
    """``value`` when it is a safe name; ``ValueError`` (saying what is wrong) otherwise."""
    if not _NAME.match(value) or ".." in value:
        shown = value.encode("unicode_escape").decode()[:60]
        raise ValueError(
            f"'{shown}' is not a safe {what}: use letters, digits, '.', '_' and '-' (starting with a letter or "
            "digit, no '..', at most 100 characters)"
        )
    return value


def env_key(value: str) -> str:
    """An environment variable name (``[A-Za-z_][A-Za-z0-9_]*``)."""
    if not _ENV_KEY.match(value):
        shown = value.encode("unicode_escape").decode()[:60]
        raise ValueError(f"'{shown}' is not an environment variable name (letters, digits, '_')")
    return value


def single_line(value: str, what: str = "value") -> str:
    """``value`` when it has no control character (newline, tab, ESC, NUL…); ``ValueError`` otherwise."""
    found = _CONTROL.search(value)
    if found:
        raise ValueError(f"the {what} contains a control character ({found.group()!r}); it must be one line of text")
    return value
