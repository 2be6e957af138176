"""Any operation, planned and applied inside one guest: ``in_container`` (a CT, through ``pct exec``) and
``in_vm`` (a VM's guest, over SSH at the inventory's address) are this one wrapper, each naming its guest.

The inner operation plans against the guest's facts; only actions that make sense inside a guest (files,
commands, service restarts) may come back, each wrapped in :class:`~gpuhost.core.actions.InGuest`.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from pydantic import ConfigDict, Field

from gpuhost.core.actions import GUEST_ACTIONS, InGuest
from gpuhost.core.guest import Guest
from gpuhost.core.operation import Args, Operation, OperationLookup, SkipTask
from gpuhost.core.plan import Plan
from gpuhost.errors import OperationFailed

if TYPE_CHECKING:
    from gpuhost.core.context import HostContext


class InGuestArgs(Args):
    """The inner operation; a subclass adds the guest's id (``ctid``, ``vmid``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    operation: Operation[Any] = Field(
        description="the operation to run inside: in a playbook its kind, with its arguments in params"
    )


G = TypeVar("G", bound=InGuestArgs)
#: What an operation inside a guest may ask for.
INSIDE_ACTIONS = GUEST_ACTIONS


class InGuestOperation(Operation[G]):
    """The wrapper; subclasses say which guest it is and how its status is read."""

    #: how an error names the guest's kind: "inside a container"
    inside: ClassVar[str]

    @abstractmethod
    def guest(self) -> Guest:
        """The guest the inner operation runs in."""

    @abstractmethod
    def status(self, host: HostContext) -> str | None:
        """The guest's power state (``running``, ``stopped``), None when it does not exist."""

    def waits(self, host: HostContext) -> str | None:
        """Why the inner operation must wait before anything is read (None: it need not)."""
        return None

    @property
    def inner(self) -> Operation[Any]:
        return self.args.operation

    @classmethod
    def from_dict(cls, raw: dict[str, Any], lookup: OperationLookup | None = None) -> Operation[Any]:
        if lookup is None or not isinstance(raw, dict):
            return cls(cls.Args.model_validate(raw))  # type: ignore[arg-type]
        raw = dict(raw)
        kind, params = raw.pop("operation", None), raw.pop("params", {})
        inner_cls = lookup(kind) if isinstance(kind, str) else None
        if inner_cls is None:
            raise ValueError(f"{cls.kind}: unknown operation {kind!r}")
        inner = inner_cls.from_dict(params or {}, lookup)
        return cls(cls.Args.model_validate({**raw, "operation": inner}))  # type: ignore[arg-type]

    def describe(self) -> str:
        return f"{self.kind}({self.inner.kind})"

    def plan_ahead(self, host: HostContext) -> None:
        """The inner operation's facts, asked before the guest's status is known: a converged run finds the guest
        running, and a read in a guest that is not running fails and is not kept (the plan then reads the status
        and stops there)."""
        self.inner.plan(host.guest(self.guest()))

    def plan(self, host: HostContext) -> Plan:
        inner, guest = self.inner, self.guest()
        waiting = self.waits(host)
        if waiting:
            raise SkipTask(waiting)
        status = self.status(host)
        if status != "running":
            if host.check:
                raise SkipTask(f"{guest} is {status or 'not created yet'}: would {inner.describe()} inside")
            raise OperationFailed(f"{guest} is {status or 'absent'}: cannot {inner.kind} inside it")
        plan = inner.plan(host.guest(guest))
        actions = []
        for act in plan.actions:
            if not isinstance(act, INSIDE_ACTIONS):
                raise OperationFailed(f"{self.kind}: {inner.kind} asks for {act.describe()}, which {self.inside}")
            actions.append(InGuest(guest, act))
        return Plan(reason=f"{guest}: {plan.reason}", actions=list(actions), diff=plan.diff)
