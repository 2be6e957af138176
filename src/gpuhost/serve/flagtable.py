"""SGLang's real command-line flag tables, one JSON file per released version."""

from __future__ import annotations

import json
from enum import StrEnum
from functools import cache, cached_property
from importlib import resources
from typing import Any

from pydantic import BaseModel, ConfigDict

from gpuhost.errors import ConfigError


class FlagArg(BaseModel):
    """One argparse action of ``ServerArgs.add_cli_args``."""

    model_config = ConfigDict(frozen=True)

    flags: list[str]
    dest: str
    action: str
    type: str | None = None
    choices: list[Any] | None = None
    nargs: int | str | None = None
    default: Any = None
    help: str | None = None

    @property
    def deprecated(self) -> bool:
        return "deprecated" in self.action.lower()

    @property
    def takes_value(self) -> bool:
        """Whether the flag consumes the next token (or ``=value``)."""
        if self.nargs == 0:
            return False
        return self.action not in ("store_true", "store_false", "store_const", "append_const", "count")


class FlagTable(BaseModel):
    """The whole table of one SGLang version, as committed."""

    sglang_version: str
    source: str
    args: list[FlagArg]

    def by_flag(self) -> dict[str, FlagArg]:
        """Each option string's action (made once per table: a launch resolves a few hundred flags)."""
        return self._by_flag

    @cached_property
    def _by_flag(self) -> dict[str, FlagArg]:
        return {flag: arg for arg in self.args for flag in arg.flags}


class Match(StrEnum):
    EXACT = "exact"
    PREFIX = "prefix"  # a unique argparse abbreviation
    AMBIGUOUS = "ambiguous"
    UNKNOWN = "unknown"


class Resolution(BaseModel):
    """What argparse would make of one option string."""

    match: Match
    option: str
    arg: FlagArg | None = None
    candidates: list[str] = []


def _version_key(version: str) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in version.replace(".post", ".").split("."):
        parts.append(int(piece) if piece.isdigit() else 0)
    return tuple(parts)


def version_key(version: str) -> tuple[int, ...]:
    """Sort key of an SGLang version such as ``0.5.15.post1``."""
    return _version_key(version)


@cache
def available_versions() -> tuple[str, ...]:
    """SGLang versions with a committed table, oldest first."""
    folder = resources.files("gpuhost.serve") / "flags"
    names = [p.name for p in folder.iterdir() if p.name.startswith("sglang-") and p.name.endswith(".json")]
    return tuple(sorted((n[len("sglang-") : -len(".json")] for n in names), key=_version_key))


@cache
def load_table(version: str) -> FlagTable:
    """The table of ``version`` (exact release string, e.g. ``0.5.23`` or ``0.5.15.post1``)."""
    if version not in available_versions():
        known = ", ".join(available_versions())
        raise ConfigError(
            f"no SGLang flag table for version {version} (tables: {known}); "
            "run scripts/extract_sglang_flags.py to add one"
        )
    text = (resources.files("gpuhost.serve") / "flags" / f"sglang-{version}.json").read_text()
    return FlagTable.model_validate(json.loads(text))


def resolve(table: FlagTable, option: str) -> Resolution:
    """Resolve ``option`` (``--name``, no ``=value``) as argparse does: exact, else unique prefix."""
    flags = table.by_flag()
    if option in flags:
        return Resolution(match=Match.EXACT, option=option, arg=flags[option])
    if option.startswith("--"):
        hits = sorted(f for f in flags if f.startswith(option))
        if len(hits) == 1:  # argparse (3.11) counts option strings, not actions
            return Resolution(match=Match.PREFIX, option=option, arg=flags[hits[0]], candidates=hits)
        if hits:
            return Resolution(match=Match.AMBIGUOUS, option=option, candidates=hits)
    return Resolution(match=Match.UNKNOWN, option=option)


def history(flag: str, versions: tuple[str, ...] | None = None) -> list[tuple[str, FlagArg | None]]:
    """``flag`` in each table, oldest first (``None`` where absent)."""
    out: list[tuple[str, FlagArg | None]] = []
    for v in versions or available_versions():
        out.append((v, load_table(v).by_flag().get(flag)))
    return out


def removed_in(flag: str, version: str) -> tuple[str, str] | None:
    """``(last version with it, first version without it)`` when ``flag`` existed before ``version``."""
    versions = tuple(v for v in available_versions() if _version_key(v) <= _version_key(version))
    last_seen: str | None = None
    for v, arg in history(flag, versions):
        if arg is not None:
            last_seen = v
    if last_seen is None or last_seen == version:
        return None
    later = [v for v in versions if _version_key(v) > _version_key(last_seen)]
    return (last_seen, later[0]) if later else None
