"""Facts as ``(command, parse)`` pairs.

A :class:`Fact` says which read-only shell command reveals something about a target and how
its output becomes typed data. Running it is the host context's job (one round trip, cached
until the runner changes the host); parsing is a pure function, so a test can fill any fact
with a captured output and no host at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from gpuhost.core.result import CommandResult

T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class Fact(Generic[T]):
    """``command(*args)`` is run on the target; ``parse(result, *args)`` turns its result into ``T``.

    A ``live`` fact reads a state that changes by itself (a journal, a port, a health probe): it is never
    cached, each ask is a new read (a wait re-reads it, a proof asks it afresh)."""

    name: str
    command: Callable[..., str]
    parse: Callable[..., T]
    live: bool = False

    def __call__(self, result: CommandResult, *args: Any) -> T:
        return self.parse(result, *args)

    def __repr__(self) -> str:
        return f"Fact({self.name})"


def fact(name: str, command: str | Callable[..., str], *, live: bool = False) -> Callable[[Callable[..., T]], Fact[T]]:
    """Decorate a parse function: ``@fact("pve_version", "pveversion")``."""

    def wrap(parse: Callable[..., T]) -> Fact[T]:
        cmd = command if callable(command) else (lambda *_a, _c=command: _c)
        return Fact(name=name, command=cmd, parse=parse, live=live)

    return wrap
