"""Facts about Debian packages."""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from gpuhost.connection.base import Connection


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


def installed_versions(conn: Connection, names: Iterable[str]) -> dict[str, str]:
    names = list(names)
    if not names:
        return {}
    fmt = "${Package}\\t${Version}\\t${db:Status-Abbrev}\\n"
    cmd = f"dpkg-query -W -f {shlex.quote(fmt)} " + " ".join(shlex.quote(n) for n in names) + " 2>/dev/null"
    result = conn.run(cmd, ok_codes=(0, 1))
    return parse_dpkg_query(result.stdout)


def held(conn: Connection) -> set[str]:
    return set(conn.run("apt-mark showhold").stdout.split())
