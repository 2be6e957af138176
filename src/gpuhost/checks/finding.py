"""Findings, their levels, and the registry of named checks."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, TypeVar


class Level(IntEnum):
    """How bad a finding is; a set of findings is as bad as its worst one."""

    PASS = 0
    INFO = 1
    WARN = 2
    FAIL = 3

    @property
    def word(self) -> str:
        return self.name


@dataclass(frozen=True)
class Finding:
    """One observation of one check about one subject (a host, a CT, a GPU, a GPU pair, a server).

    ``message`` says what was seen; ``cause`` why it matters or what produced it; ``fix``
    what the operator does about it. Only ``message`` is required.
    """

    level: Level
    check: str
    subject: str
    message: str
    cause: str | None = None
    fix: str | None = None

    @property
    def failed(self) -> bool:
        return self.level >= Level.FAIL

    def to_json(self) -> dict[str, Any]:
        return {
            "level": self.level.word,
            "check": self.check,
            "subject": self.subject,
            "message": self.message,
            "cause": self.cause,
            "fix": self.fix,
        }


def worst(findings: Iterable[Finding]) -> Level:
    return max((f.level for f in findings), default=Level.PASS)


@dataclass(frozen=True)
class CheckInfo:
    """A registered check: its name (``Finding.check``), a title, and what its failure means."""

    name: str
    title: str
    group: str
    meaning: str
    fix: str


_REGISTRY: dict[str, CheckInfo] = {}

F = TypeVar("F", bound=Callable[..., Any])


def check(name: str, *, title: str, group: str, meaning: str, fix: str) -> Callable[[F], F]:
    """Register a check function under ``name`` (refused twice)."""

    def wrap(fn: F) -> F:
        if name in _REGISTRY:
            raise RuntimeError(f"check '{name}' registered twice")
        _REGISTRY[name] = CheckInfo(name=name, title=title, group=group, meaning=meaning, fix=fix)
        fn.check_name = name  # type: ignore[attr-defined]
        return fn

    return wrap


def registered() -> dict[str, CheckInfo]:
    """Every check known so far (only the modules imported so far have registered theirs)."""
    return dict(_REGISTRY)


def check_name(fn: Callable[..., Any]) -> str:
    """The name a function was registered under with :func:`check`."""
    name = getattr(fn, "check_name", None)
    if not isinstance(name, str):
        raise TypeError(f"{fn.__qualname__} is not registered with @check")
    return name
