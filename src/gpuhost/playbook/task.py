"""A task: one operation with its arguments, name, tags and handler notifications."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from gpuhost.errors import OperationFailed
from gpuhost.operations import registry
from gpuhost.operations.base import Operation

if TYPE_CHECKING:
    from gpuhost.runner.context import HostContext


def _templated(value: Any) -> bool:
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, dict):
        return any(_templated(v) for v in value.values())
    if isinstance(value, list):
        return any(_templated(v) for v in value)
    return False


def validation_message(exc: ValidationError) -> str:
    first = exc.errors()[0]
    field_name = ".".join(str(p) for p in first["loc"])
    msg = "unknown field" if first["type"] == "extra_forbidden" else first["msg"]
    return f"field '{field_name}': {msg}" if field_name else msg


@dataclass(frozen=True)
class Task:
    name: str
    kind: str
    args: dict[str, Any]
    tags: tuple[str, ...] = ()
    notify: tuple[str, ...] = ()
    role: str | None = None
    source: str | None = None  # "file:line" for messages
    #: an already-built operation (roles build theirs in Python); else built from ``args``
    prebuilt: Operation | None = field(default=None, compare=False)

    @property
    def is_flush(self) -> bool:
        """``- meta: flush_handlers``: run the handlers notified so far, here."""
        return self.kind == "meta"

    @property
    def templated(self) -> bool:
        return _templated(self.args)

    def validate_static(self) -> None:
        """Check the arguments when they hold no templates (so errors come before any host is touched)."""
        if self.prebuilt is not None or self.templated or self.is_flush:
            return
        cls = registry.get(self.kind)
        assert cls is not None
        cls.Args.model_validate(self.args)

    def operation(self, host: HostContext) -> Operation:
        if self.prebuilt is not None:
            return self.prebuilt
        cls = registry.get(self.kind)
        assert cls is not None, self.kind
        args = host.render_value(self.args) if self.templated else self.args
        try:
            return cls.from_dict(args)
        except ValidationError as exc:
            where = f" ({self.source})" if self.source else ""
            raise OperationFailed(f"{self.kind}{where}: {validation_message(exc)}") from None


FLUSH_HANDLERS = Task(name="flush handlers", kind="meta", args={"action": "flush_handlers"})


def role_task(name: str, op: Operation, *, notify: tuple[str, ...] = (), tags: tuple[str, ...] = ()) -> Task:
    """A task built in Python by a role."""
    return Task(name=name, kind=op.kind, args={}, notify=notify, tags=tags, prebuilt=op)
