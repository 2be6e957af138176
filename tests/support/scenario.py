"""A :class:`~gpuhost.core.context.HostContext` with no connection: facts come from a scenario.

A scenario maps ``(fact, args)`` (the fact object or its name) to either the parsed value, or what
the fact's command printed on a real host (a :class:`~gpuhost.core.result.CommandResult`, or
:class:`Captured` text): then the fact's own parser runs on it, so captured outputs go through
the real parsers. A fact the scenario does not provide is an error that names it and its args.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from gpuhost.core.facts import Fact
from gpuhost.core.guest import Guest
from gpuhost.core.result import CommandResult
from gpuhost.templating import Templates

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]
TEMPLATES = REPO / "templates"

FactRef = Fact[Any] | str
FactKey = tuple[str, tuple[Any, ...]]


class MissingFact(AssertionError):
    """The operation asked for a fact the scenario did not provide (an AssertionError: nothing catches it)."""


@dataclass(frozen=True)
class Captured:
    """What a fact's command printed (and its exit status): parsed by the fact's own parser."""

    stdout: str
    exit_code: int = 0
    stderr: str = ""


def key_of(ref: FactRef, args: Iterable[Any] = ()) -> FactKey:
    name = ref.name if isinstance(ref, Fact) else ref
    return name, tuple(args)


@dataclass
class ScenarioHost:
    """One host of a scenario: ``facts`` keyed by :func:`key_of` (or ``(fact, args)`` pairs)."""

    facts: Mapping[Any, Any]
    name: str = "pve1"
    vars: Mapping[str, Any] = field(default_factory=dict)
    check: bool = False
    reboot_pending: bool = False
    restarts_pending: frozenset[Guest] = frozenset()
    guests: Mapping[Guest, ScenarioHost] = field(default_factory=dict)
    templates: Templates | None = None
    asked: list[FactKey] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._given: dict[FactKey, Any] = {}
        for k, v in self.facts.items():
            ref, args = (k, ()) if isinstance(k, (Fact, str)) else k
            self._given[key_of(ref, args)] = v
        self._cache: dict[FactKey, Any] = {}

    def restart_pending(self, guest: Guest) -> bool:
        return guest in self.restarts_pending

    def fact(self, fact: Fact[T], *args: Any) -> T:
        key = key_of(fact, args)
        self.asked.append(key)
        if key not in self._given:
            given = ", ".join(f"{n}{list(a)}" for n, a in self._given) or "none"
            raise MissingFact(
                f"{self.name}: the scenario has no fact '{fact.name}' with args {list(args)} (it has: {given})"
            )
        if key not in self._cache:
            value = self._given[key]
            command = fact.command(*args)  # the command must build for these args, as on a host
            if isinstance(value, Captured):
                value = CommandResult(command, value.exit_code, value.stdout, value.stderr)
            if isinstance(value, CommandResult):
                value = fact.parse(value, *args)
            self._cache[key] = value
        return self._cache[key]  # type: ignore[no-any-return]

    def guest(self, guest: Guest) -> ScenarioHost:
        if guest not in self.guests:
            raise MissingFact(f"{self.name}: the scenario has no guest {guest}")
        return self.guests[guest]

    def render_template(self, name: str, extra: Mapping[str, Any] | None = None) -> str:
        templates = self.templates or Templates([TEMPLATES])
        return templates.render_file(name, {**self.vars, **(extra or {})})
