"""``apt``: Debian packages installed (at a version, optionally held) or removed."""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator

from gpuhost.core.actions import RunCommand
from gpuhost.core.operation import Args, Operation
from gpuhost.core.plan import Plan, nothing
from gpuhost.facts import packages

if TYPE_CHECKING:
    from gpuhost.core.context import HostContext

_NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
_APT_ENV = "DEBIAN_FRONTEND=noninteractive"


class AptArgs(Args):
    #: package name → version (``None``: any version)
    packages: dict[str, str | None] = Field(
        description="package name → version (null: any version); a list [dkms, pve-headers=8.2] is accepted too"
    )
    state: Literal["present", "absent"] = Field(
        default="present", description="present: installed at the version given; absent: removed"
    )
    hold: bool = Field(default=False, description="apt-mark hold the packages so an upgrade cannot move them")
    update_cache: bool = Field(default=False, description="apt-get update before installing")

    @field_validator("packages", mode="before")
    @classmethod
    def _list_form(cls, v: object) -> object:
        if isinstance(v, list):  # ["dkms", "pve-headers=8.2"] is accepted too
            out: dict[str, str | None] = {}
            for item in v:
                name, _, version = str(item).partition("=")
                out[name] = version or None
            return out
        return v

    @field_validator("packages")
    @classmethod
    def _names(cls, v: dict[str, str | None]) -> dict[str, str | None]:
        if not v:
            raise ValueError("name at least one package")
        for name in v:
            if not _NAME.match(name):
                raise ValueError(f"'{name}' is not a Debian package name")
        return v


class Apt(Operation[AptArgs]):
    """Debian packages installed at a version (or removed), optionally held against upgrades."""

    kind = "apt"
    Args = AptArgs

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        have = host.fact(packages.installed_versions, tuple(a.packages))
        if a.state == "absent":
            remove = [n for n in a.packages if n in have]
            if not remove:
                return nothing("not installed: " + ", ".join(a.packages))
            cmd = f"{_APT_ENV} apt-get remove -y -q " + " ".join(shlex.quote(n) for n in remove)
            return Plan(reason="remove " + ", ".join(remove), actions=[RunCommand(cmd)])
        todo = [
            f"{n}={v}" if v else n for n, v in a.packages.items() if n not in have or (v is not None and have[n] != v)
        ]
        actions: list[RunCommand] = []
        if todo:
            if a.update_cache:
                actions.append(RunCommand(f"{_APT_ENV} apt-get update -q"))
            actions.append(
                RunCommand(
                    f"{_APT_ENV} apt-get install -y -q --allow-change-held-packages "
                    + " ".join(shlex.quote(t) for t in todo)
                )
            )
        if a.hold:
            held: set[str] = host.fact(packages.held)
            unheld = sorted(set(a.packages) - held)
            if unheld:
                actions.append(RunCommand("apt-mark hold " + " ".join(shlex.quote(n) for n in unheld)))
        if not actions:
            return nothing("installed: " + ", ".join(f"{n} {have[n]}" for n in a.packages))
        return Plan(
            reason="install " + ", ".join(todo) if todo else "hold " + ", ".join(a.packages), actions=list(actions)
        )
