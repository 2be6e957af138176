"""Operations: idempotent building blocks that read facts and decide what must change.

An operation is declared in a playbook as ``{kind: {args...}}`` or built by a role in Python
with typed arguments. :meth:`Operation.plan` reads facts through the :class:`HostContext` and
returns a :class:`~gpuhost.core.plan.Plan`; only the runner applies it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from gpuhost.core.context import HostContext
    from gpuhost.core.plan import Plan


class Args(BaseModel):
    """Base of every operation's arguments: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class SkipTask(Exception):
    """Raised by :meth:`Operation.plan` when the task does not apply now (the reason says why)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


A = TypeVar("A", bound=Args)

#: Finds an operation class by its playbook key (the operation table's ``get``).
OperationLookup = Callable[[str], "type[Operation[Any]] | None"]


class Operation(ABC, Generic[A]):
    """Subclasses set ``kind`` (the playbook key) and ``Args`` (their argument model)."""

    kind: ClassVar[str]
    Args: ClassVar[type[Args]]

    def __init__(self, args: A) -> None:
        if not isinstance(args, self.Args):
            raise TypeError(f"{type(self).__name__} takes {self.Args.__name__}, not {type(args).__name__}")
        self.args: A = args

    @classmethod
    def from_dict(cls, raw: dict[str, Any], lookup: OperationLookup | None = None) -> Operation[Any]:
        """Build from a playbook's mapping (validated by ``Args``). ``lookup`` finds other operations by kind,
        for operations that wrap one (``in_container``)."""
        args: Any = cls.Args.model_validate(raw)
        return cls(args)

    @abstractmethod
    def plan(self, host: HostContext) -> Plan:
        """Read facts, decide; must not change the host."""

    def plan_ahead(self, host: HostContext) -> None:
        """Ask for the facts a plan will read once the fact it stopped at is known, without deciding anything.

        The read-ahead calls it when :meth:`plan` stopped at a missing fact, so that facts behind that one can be
        read in the same round trip (reads that turn out not to apply are simply not used). Default: nothing."""

    def describe(self) -> str:
        return self.kind
