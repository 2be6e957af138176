"""Variables merged from their layers, each value remembering where it was written.

Precedence, lowest first: role defaults (the ``Vars`` models), inventory ``vars``, the node's groups'
``vars``, the node's own ``vars`` (and its ``containers``), the role reference's ``vars``, the play's
``vars``, then ``-e``. A value that fails a role's ``Vars`` model is reported at the file and line
where it was written, with the field's name, before any host is contacted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from gpuhost import yamlfile
from gpuhost.errors import ConfigError
from gpuhost.roles.base import RoleVars


@dataclass(frozen=True)
class Origin:
    """Where a value was written: a YAML document and the path to it, or a command-line argument."""

    file: str
    data: Any = None  # ruamel document (for line numbers), None for the command line
    loc: tuple[str | int, ...] = ()
    line_no: int | None = None  # fixed line (the n-th -e)

    def line(self, sub: Sequence[str | int] = ()) -> int | None:
        if self.data is None:
            return self.line_no
        return yamlfile.line_of(self.data, [*self.loc, *sub])


@dataclass(frozen=True)
class Layer:
    values: Mapping[str, Any]
    origins: Mapping[str, Origin]

    @classmethod
    def from_yaml(cls, values: Mapping[str, Any], file: str, data: Any, loc: Sequence[str | int]) -> Layer:
        return cls(dict(values), {k: Origin(file, data, (*loc, k)) for k in values})


@dataclass
class MergedVars:
    values: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, Origin] = field(default_factory=dict)

    def where(self, key: str) -> Origin | None:
        return self.origins.get(key)


def merge(layers: Iterable[Layer]) -> MergedVars:
    out = MergedVars()
    for layer in layers:
        out.values.update(layer.values)
        out.origins.update(layer.origins)
    return out


#: a model-level rule's message names the variable it is about, or a path into it (``containers.200.serve``)
_FIELD_PREFIX = re.compile(r"^(?:Value error, )?(?P<field>[a-z_][a-z0-9_]*(?:\.[A-Za-z0-9_-]+)*): (?P<msg>.*)$", re.S)


def validate_role_vars(model: type[RoleVars], merged: MergedVars, *, role: str, fallback: Origin) -> RoleVars:
    """The role's typed variables, or a :class:`ConfigError` naming file, line and field."""
    try:
        return model.model_validate(merged.values)
    except ValidationError as exc:
        errors = exc.errors()
        first = errors[0]
        loc = [p for p in first["loc"] if not (isinstance(p, str) and "[" in p)]
        msg = str(first["msg"])
        path = False
        if not loc:
            # a model-level rule: "FIELD: message" (or "FIELD.KEY.0: message") names what it is about
            m = _FIELD_PREFIX.match(msg)
            if m:
                loc = [int(p) if p.isdigit() else p for p in m.group("field").split(".")]
                msg, path = m.group("msg"), len(loc) > 1
            else:
                msg = msg.removeprefix("Value error, ")
        elif first["type"] == "value_error":
            msg = msg.removeprefix("Value error, ")
        key = str(loc[0]) if loc else None
        origin = merged.where(key) if key else None
        where = origin or fallback
        line = where.line([str(p) if not isinstance(p, int) else p for p in loc[1:]]) if origin else where.line()
        field_name = ".".join(str(p) for p in loc) if loc else None
        if path and origin is not None and origin.data is not None:  # the path as written in its document
            field_name = ".".join(str(p) for p in (*origin.loc, *loc[1:]))
        raise ConfigError(f"{msg} (variable of role {role})", file=where.file, line=line, field=field_name) from None
