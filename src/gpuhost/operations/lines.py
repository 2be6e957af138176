"""``line``: one line present in (or absent from) a file, the rest untouched."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator

from gpuhost.core.operation import Args, Operation
from gpuhost.core.plan import Plan, file_plan, nothing
from gpuhost.errors import OperationFailed
from gpuhost.facts import files as file_facts
from gpuhost.operations.files import secret_content

if TYPE_CHECKING:
    from gpuhost.core.context import HostContext


class LineArgs(Args):
    path: str = Field(description="the file to edit")
    line: str | None = Field(
        default=None, description="the line that must be present (one line); replaces the last regexp match"
    )
    regexp: str | None = Field(
        default=None, description="lines matching this regular expression are replaced (present) or removed (absent)"
    )
    state: Literal["present", "absent"] = Field(
        default="present", description="present: the line is there; absent: matching lines are removed"
    )
    create: bool = Field(default=False, description="create the file when it does not exist")

    @field_validator("regexp")
    @classmethod
    def _compiles(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as exc:
                raise ValueError(f"invalid regular expression: {exc}") from None
        return v

    @field_validator("line")
    @classmethod
    def _single_line(cls, v: str | None) -> str | None:
        if v is not None and "\n" in v:
            raise ValueError("must be a single line")
        return v


def edit_lines(text: str, line: str | None, regexp: str | None, state: str) -> str:
    """The text with ``line`` ensured present (replacing the last ``regexp`` match) or lines removed."""
    lines = text.splitlines()
    pattern = re.compile(regexp) if regexp else None

    def matches(candidate: str) -> bool:
        return bool(pattern.search(candidate)) if pattern else candidate == line

    if state == "absent":
        kept = [x for x in lines if not matches(x)]
    else:
        assert line is not None
        kept = list(lines)
        hits = [i for i, x in enumerate(kept) if matches(x)]
        if hits:
            kept[hits[-1]] = line
        elif line not in kept:
            kept.append(line)
    if kept == lines:
        return text
    return "\n".join(kept) + "\n" if kept else ""


class Line(Operation[LineArgs]):
    """One line of a file present (replacing the last line that matches ``regexp``) or absent."""

    kind = "line"
    Args = LineArgs

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        if a.state == "present" and a.line is None:
            raise OperationFailed(f"line: state=present needs 'line' (path {a.path})")
        if a.state == "absent" and a.line is None and a.regexp is None:
            raise OperationFailed(f"line: state=absent needs 'line' or 'regexp' (path {a.path})")
        found = host.fact(file_facts.content_and_mode, a.path)
        before, current = (None, None) if found is None else found
        if before is None:
            if a.state == "absent":
                return nothing(f"{a.path} does not exist")
            if not a.create:
                raise OperationFailed(f"{a.path} does not exist (set create: true to create it)")
        after = edit_lines(before or "", a.line, a.regexp, a.state)
        secret = secret_content(after, before, None, current, used=False)  # a private file's lines stay private
        return file_plan(a.path, before, after, reason_same=f"{a.path}: line already {a.state}", secret=secret)
