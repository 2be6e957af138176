"""A task: one operation with its name, tags and the handlers it notifies."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuhost.core.context import HostContext
    from gpuhost.core.operation import Operation


@dataclass(frozen=True)
class Task:
    """``operation`` is built already (roles, untemplated playbook tasks), or ``build`` makes it
    for a host (playbook tasks whose arguments hold templates)."""

    name: str
    kind: str
    operation: Operation[Any] | None = field(default=None, compare=False)
    build: Callable[[HostContext], Operation[Any]] | None = field(default=None, compare=False)
    tags: tuple[str, ...] = ()
    notify: tuple[str, ...] = ()
    role: str | None = None
    source: str | None = None  # "file:line" for messages

    @property
    def is_flush(self) -> bool:
        """``- meta: flush_handlers``: run the handlers notified so far, here."""
        return self.kind == "meta"

    def operation_for(self, host: HostContext) -> Operation[Any]:
        if self.operation is not None:
            return self.operation
        if self.build is None:
            raise TypeError(f"task '{self.name}' has no operation")
        return self.build(host)

    def in_role(self, role: str) -> Task:
        return replace(self, role=role)


FLUSH_HANDLERS = Task(name="flush handlers", kind="meta")


def task(name: str, op: Operation[Any], *, notify: tuple[str, ...] = (), tags: tuple[str, ...] = ()) -> Task:
    """A task built in Python (by a role) around an operation object."""
    return Task(name=name, kind=op.kind, operation=op, notify=notify, tags=tags)
