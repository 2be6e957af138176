"""Many read-only probes in one round trip: each section's output and exit status."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

_MARK = "@@gpuhost-section@@"


@dataclass(frozen=True)
class ProbeOutput:
    output: str
    status: int

    @property
    def ok(self) -> bool:
        return self.status == 0


def sections_command(probes: Mapping[str, str]) -> str:
    """One shell script that runs every probe at once (stderr discarded), then prints each, framed by markers."""
    parts = ["s=$(mktemp -d) || exit 1; trap 'rm -rf -- \"$s\"' EXIT"]
    for i, cmd in enumerate(probes.values()):
        parts.append(f'{{ ( {cmd}\n) >"$s/{i}" 2>/dev/null </dev/null; echo $? >"$s/{i}.rc"; }} &')
    parts.append("wait")
    for i, key in enumerate(probes):
        parts.append(f'echo \'{_MARK} {key}\'; cat "$s/{i}"; echo "{_MARK}-status $(cat "$s/{i}.rc")"')
    return "\n".join(parts)


def parse_sections(text: str) -> dict[str, ProbeOutput]:
    """The output of :func:`sections_command`, keyed like its probes."""
    out: dict[str, ProbeOutput] = {}
    for chunk in text.split(_MARK + " ")[1:]:
        key, _, rest = chunk.partition("\n")
        body, _, status = rest.rpartition(f"{_MARK}-status ")
        out[key.strip()] = ProbeOutput(body.rstrip("\n"), int(status.split()[0]) if status.strip() else 1)
    return out
