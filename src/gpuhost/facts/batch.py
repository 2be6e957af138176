"""Many read-only probes in one round trip: each section's output and exit status."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpuhost.connection.base import Connection

_MARK = "@@gpuhost-section@@"


@dataclass(frozen=True)
class Section:
    output: str
    status: int

    @property
    def ok(self) -> bool:
        return self.status == 0


def run_sections(conn: Connection, probes: Mapping[str, str]) -> dict[str, Section]:
    """Run every probe (a shell snippet, stderr discarded) in one command; keyed like ``probes``."""
    parts = []
    for key, cmd in probes.items():
        parts.append(f"echo '{_MARK} {key}'; ( {cmd} ) 2>/dev/null; echo \"{_MARK}-status $?\"")
    text = conn.run("\n".join(parts), check=False).stdout
    out: dict[str, Section] = {}
    for chunk in text.split(_MARK + " ")[1:]:
        key, _, rest = chunk.partition("\n")
        body, _, status = rest.rpartition(f"{_MARK}-status ")
        out[key.strip()] = Section(body.rstrip("\n"), int(status.split()[0]) if status.strip() else 1)
    return out
