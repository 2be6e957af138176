"""``module_list``: kernel modules listed in ``/etc/modules`` or ``/etc/modules-load.d/*.conf``."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator

from gpuhost.core.operation import Args, Operation
from gpuhost.core.plan import Plan, file_plan
from gpuhost.facts import files as file_facts

if TYPE_CHECKING:
    from gpuhost.core.context import HostContext

_MODULE = re.compile(r"^[A-Za-z0-9_-]+$")


def listed_modules(text: str) -> list[str]:
    """Module names in a modules-load file (comments and blank lines skipped, ``-`` ≡ ``_``)."""
    names = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            names.append(line.split()[0].replace("-", "_"))
    return names


def edit_module_list(text: str, modules: list[str], state: str) -> str:
    wanted = [m.replace("-", "_") for m in modules]
    if state == "present":
        have = set(listed_modules(text))
        missing = [m for m in wanted if m not in have]
        if not missing:
            return text
        base = text if not text or text.endswith("\n") else text + "\n"
        return base + "".join(f"{m}\n" for m in missing)
    kept = []
    for raw in text.splitlines(keepends=True):
        name = raw.split("#", 1)[0].strip()
        if name and name.split()[0].replace("-", "_") in wanted:
            continue
        kept.append(raw)
    return "".join(kept)


class ModuleListArgs(Args):
    modules: list[str] = Field(description="kernel module names, one per line of the file")
    path: str = Field(
        default="/etc/modules", description="the modules file (/etc/modules, or a file in /etc/modules-load.d)"
    )
    state: Literal["present", "absent"] = Field(
        default="present", description="present: each module listed; absent: removed from the file"
    )

    @field_validator("modules")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        for m in v:
            if not _MODULE.match(m):
                raise ValueError(f"'{m}' is not a kernel module name")
        return v


class ModuleList(Operation[ModuleListArgs]):
    """Kernel modules listed (or not) in a modules file such as ``/etc/modules``, one per line."""

    kind = "module_list"
    Args = ModuleListArgs

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        before = host.fact(file_facts.content, a.path)
        after = edit_module_list(before or "", a.modules, a.state)
        if before is None and after == "":
            after = ""
            return file_plan(a.path, "", "", reason_same=f"{a.path} does not exist; nothing to remove")
        return file_plan(a.path, before, after, reason_same=f"{a.path}: {', '.join(a.modules)} already {a.state}")
