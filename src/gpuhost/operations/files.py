"""Whole-file operations: ``copy`` (content given inline) and ``template`` (Jinja2)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from gpuhost.core.actions import WriteFile
from gpuhost.core.operation import Args, Operation
from gpuhost.core.plan import Plan, file_plan
from gpuhost.facts import files as file_facts
from gpuhost.redact import redact
from gpuhost.templating import track_secrets

#: modes that say "only root may read this": such a file's text is never shown in a diff
_PRIVATE = (0o600, 0o400)


def _secret_mode(mode: int | None) -> bool:
    return mode is not None and mode in _PRIVATE


def secret_content(wanted: str, before: str | None, mode: int | None, current: int | None, *, used: bool) -> bool:
    """A file's text is secret when its content uses a secret (a template called ``secret_env``/``secret_file``,
    or the text holds a registered secret or a key such as ``SGLANG_API_KEY=…``), when the wanted mode is
    private, or when the file there now (through a link) is readable by its owner alone: the old text of a
    rotated secret is as secret as the new one."""
    if used or _secret_mode(mode) or (current is not None and current & 0o077 == 0):
        return True
    return any(text is not None and redact(text) != text for text in (wanted, before))


if TYPE_CHECKING:
    from gpuhost.core.context import HostContext


def parse_mode(value: str | int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, int):
        # YAML reads 0644 as the int 644 in YAML 1.2; treat digits as octal either way
        value = str(value)
    value = value.strip()
    if not value or any(c not in "01234567" for c in value.removeprefix("0o")):
        raise ValueError(f"'{value}' is not an octal mode such as \"0644\"")
    return int(value.removeprefix("0o"), 8)


class _FileArgs(Args):
    dest: str = Field(description="absolute path of the file on the target")
    mode: str | None = Field(
        default=None, description="octal mode such as '0644'; null keeps the file's mode (0644 for a new file)"
    )

    @field_validator("dest")
    @classmethod
    def _absolute(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError("must be an absolute path")
        return v

    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, v: object) -> str | None:
        if v is None:
            return None
        parse_mode(v)  # type: ignore[arg-type]
        return str(v)


def _read(host: HostContext, dest: str) -> tuple[str | None, int | None]:
    """The file's text and mode (through a link): one fact, so one read."""
    found = host.fact(file_facts.content_and_mode, dest)
    return (None, None) if found is None else found


def _with_mode(dest: str, plan: Plan, mode: int | None, current: int | None, content: str | None) -> Plan:
    """Add a chmod-only change when the content is right but the mode is not."""
    if plan.changes or mode is None or current == mode:
        return plan
    reason = f"mode of {dest} {current or 0:o} → {mode:o}"
    return Plan(reason=reason, actions=[WriteFile(dest, content or "", mode, backup=False)])


class CopyArgs(_FileArgs):
    content: str = Field(description="the file's exact content")


class Copy(Operation[CopyArgs]):
    """A file with exactly the given content."""

    kind = "copy"
    Args = CopyArgs

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        mode = parse_mode(a.mode)
        before, current = _read(host, a.dest)
        secret = secret_content(a.content, before, mode, current, used=False)
        plan = file_plan(a.dest, before, a.content, mode, secret=secret)
        return _with_mode(a.dest, plan, mode, current, before)


class TemplateArgs(_FileArgs):
    src: str = Field(description="template name under templates/ (Jinja2; an undefined variable is an error)")
    vars: dict[str, Any] = Field(default={}, description="template variables beyond the host's (set by roles)")


class Template(Operation[TemplateArgs]):
    """A file rendered from a Jinja2 template with the host's variables."""

    kind = "template"
    Args = TemplateArgs

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        mode = parse_mode(a.mode)
        with track_secrets() as secrets:
            wanted = host.render_template(a.src, a.vars)
        before, current = _read(host, a.dest)
        secret = secret_content(wanted, before, mode, current, used=bool(secrets))
        plan = file_plan(a.dest, before, wanted, mode, reason_same=f"{a.dest} matches {a.src}", secret=secret)
        return _with_mode(a.dest, plan, mode, current, before)
