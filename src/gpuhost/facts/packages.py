"""Facts about Debian packages."""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from gpuhost.core.facts import Fact, fact
from gpuhost.core.result import CommandResult

_FORMAT = "${Package}\\t${Version}\\t${db:Status-Abbrev}\\n"


def parse_dpkg_query(text: str) -> dict[str, str]:
    """``dpkg-query -W -f '${Package}\\t${Version}\\t${db:Status-Abbrev}\\n'`` → installed name → version.

    Only packages whose status is installed (``ii``/``hi``) count.
    """
    installed: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) != 3:
            continue
        name, version, status = parts
        name = name.split(":", 1)[0]  # drop ':amd64'
        if status.strip() in ("ii", "hi") and version:
            installed[name] = version
    return installed


def _versions_cmd(names: Iterable[str]) -> str:
    names = list(names)
    if not names:
        return "true"
    return f"dpkg-query -W -f {shlex.quote(_FORMAT)} " + " ".join(shlex.quote(n) for n in names) + " 2>/dev/null"


installed_versions: Fact[dict[str, str]] = Fact(
    "installed package versions", _versions_cmd, lambda r, _names: parse_dpkg_query(r.stdout)
)


@fact("held packages", "apt-mark showhold")
def held(result: CommandResult) -> set[str]:
    return set(result.stdout.split())
