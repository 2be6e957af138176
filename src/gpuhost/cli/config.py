"""Defaults for the command line: ``gpuhost.toml`` and ``GPUHOST_*`` environment variables.

Precedence, highest first: a flag on the command line, a ``GPUHOST_*`` variable, the project's
``gpuhost.toml`` (the working directory or the nearest parent that has one), ``~/.config/gpuhost/gpuhost.toml``
(``$XDG_CONFIG_HOME``), gpuhost's own default. A file sets the variables it names that are not set::

    # gpuhost.toml
    inventory = "inventory/site.yml"   # GPUHOST_INVENTORY (relative to this file)
    forks = 20                         # GPUHOST_FORKS
    output = "json-events"             # GPUHOST_OUTPUT: text, json or json-events
    log = "logs/gpuhost.log"           # GPUHOST_LOG (relative to this file)

Bad input (TOML syntax, an unknown key, a wrong type) exits 2 naming the file, line and key.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from gpuhost.errors import ConfigError

NAME = "gpuhost.toml"
#: key → (environment variable, type, whether it is a path relative to the file)
KEYS: dict[str, tuple[str, type, bool]] = {
    "inventory": ("GPUHOST_INVENTORY", str, True),
    "forks": ("GPUHOST_FORKS", int, False),
    "output": ("GPUHOST_OUTPUT", str, False),
    "log": ("GPUHOST_LOG", str, True),
}
OUTPUTS = ("text", "json", "json-events")


def find_files(cwd: Path | None = None) -> list[Path]:
    """The config files in effect, highest precedence first."""
    found: list[Path] = []
    here = (cwd or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / NAME).is_file():
            found.append(d / NAME)
            break
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    user = Path(base) / "gpuhost" / NAME
    if user.is_file() and user.resolve() not in [f.resolve() for f in found]:
        found.append(user)
    return found


def _line_of(text: str, key: str) -> int | None:
    m = re.search(rf"^\s*{re.escape(key)}\s*=", text, re.M)
    return text[: m.start()].count("\n") + 1 if m else None


def read(path: Path) -> dict[str, str]:
    """The ``GPUHOST_*`` values ``path`` gives."""
    import tomllib

    text = path.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise ConfigError(f"invalid TOML: {exc}", file=str(path), line=int(m.group(1)) if m else None) from None
    out: dict[str, str] = {}
    for key, value in data.items():
        if key not in KEYS:
            raise ConfigError(
                f"unknown key (known: {', '.join(KEYS)})", file=str(path), line=_line_of(text, key), field=key
            )
        env, kind, is_path = KEYS[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ConfigError(f"must be {kind.__name__}", file=str(path), line=_line_of(text, key), field=key)
        if key == "output" and value not in OUTPUTS:
            raise ConfigError(
                f"must be one of {', '.join(OUTPUTS)}", file=str(path), line=_line_of(text, key), field=key
            )
        if key == "forks" and isinstance(value, int) and value < 1:
            raise ConfigError("must be 1 or more", file=str(path), line=_line_of(text, key), field=key)
        shown = str(value)
        if is_path and not Path(shown).expanduser().is_absolute():
            shown = str(path.parent / shown)
        out[env] = shown
    return out


#: ``GPUHOST_*`` variable → the config file that set it (by :func:`apply`; the environment's own are not here)
APPLIED: dict[str, Path] = {}
#: gpuhost's own default of each key (what a command uses when nothing sets it)
DEFAULTS = {"inventory": None, "forks": 10, "output": "text", "log": None}


def apply(cwd: Path | None = None) -> None:
    """Set each ``GPUHOST_*`` variable a config file gives and the environment does not."""
    for path in find_files(cwd):
        for env, value in read(path).items():
            if env not in os.environ:
                os.environ[env] = value
                APPLIED[env] = path


def in_effect() -> list[dict[str, object]]:
    """Each key's value now and where it comes from: the environment, a config file (with its line), or the
    default. A flag on a command line still wins over all of these."""
    rows: list[dict[str, object]] = []
    for key, (env, _kind, _is_path) in KEYS.items():
        value: str | int | None = os.environ.get(env)
        if env in APPLIED:
            path = APPLIED[env]
            line = _line_of(path.read_text(encoding="utf-8"), key)
            source = f"{path}:{line}" if line else str(path)
        elif value is not None:
            source = f"environment ({env})"
        else:
            source, value = "default", DEFAULTS[key]
        rows.append({"key": key, "env": env, "value": value, "source": source})
    return rows


def output_mode() -> str:
    """``GPUHOST_OUTPUT``: text, json or json-events."""
    from gpuhost.errors import UsageError

    mode = os.environ.get("GPUHOST_OUTPUT", "text").strip() or "text"
    if mode not in OUTPUTS:
        raise UsageError(f"GPUHOST_OUTPUT={mode!r}: must be one of {', '.join(OUTPUTS)}")
    return mode


def json_output(flag: bool) -> bool:
    """Whether a command with one JSON report prints it: ``--json``, or ``GPUHOST_OUTPUT`` json / json-events
    (a command without an event stream prints its one object, a JSON Lines stream of one line)."""
    return flag or output_mode() != "text"
