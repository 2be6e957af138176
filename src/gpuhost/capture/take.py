"""Take a capture: every probe in one round trip over one connection, each output scrubbed, then the bundle."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from datetime import UTC, datetime

from gpuhost.capture.bundle import Budget, BundleFile
from gpuhost.capture.probes import FILE_MARK, PROBES, Probe
from gpuhost.capture.scrub import Anonymiser, scrub_secrets
from gpuhost.connection.base import Connection
from gpuhost.facts.batch import parse_sections, sections_command


def bounded(command: str, limit: int) -> str:
    """``command`` with its output cut after ``limit`` + 1 bytes on the host (so a huge file never crosses the
    wire), keeping the command's own exit status."""
    return (
        "r=$(mktemp) || exit 1; { ( " + command + '\n) 2>/dev/null; echo $? >"$r"; } '
        f'| head -c {limit + 1}; rc=$(cat "$r"); rm -f -- "$r"; exit "${{rc:-1}}"'
    )


def capture_command(probes: Sequence[Probe], budget: Budget) -> str:
    return sections_command({p.path: bounded(p.command, budget.per_file) for p in probes})


def _split_many(probe: Probe, text: str) -> list[tuple[str, str]]:
    """(host path, content) of each file a multi-file probe printed."""
    out: list[tuple[str, str]] = []
    for chunk in text.split(FILE_MARK + " ")[1:]:
        source, _, body = chunk.partition("\n")
        out.append((source.strip(), body))
    return out


def take(
    conn: Connection,
    node: str,
    *,
    anonymise: bool = False,
    budget: Budget | None = None,
    probes: Sequence[Probe] = PROBES,
) -> tuple[list[BundleFile], str, str]:
    """The bundle's files, the node's name as the bundle shows it, and when it was taken."""
    budget = budget or Budget()
    taken = datetime.now(UTC).isoformat(timespec="seconds")
    result = conn.run(capture_command(probes, budget), check=False)
    sections = parse_sections(result.stdout)
    names = [node]
    for key in ("facts/hostname", "cmd/hostname-f"):
        if key in sections and sections[key].ok:
            names.extend(sections[key].output.split())
    members = sections.get("fs/etc/pve/.members")
    if members is not None and members.ok:
        names.extend(_member_names(members.output))
    anon = Anonymiser(names) if anonymise else None
    files: list[BundleFile] = []
    for probe in probes:
        section = sections.get(probe.path)
        output = section.output if section else ""
        status = section.status if section else 255
        truncated = len(output.encode()) > budget.per_file
        if truncated:
            output = output.encode()[: budget.per_file].decode(errors="ignore")
        if probe.many:
            parts = _split_many(probe, output)
            for i, (source, body) in enumerate(parts):
                name = source.rsplit("/", 1)[-1]
                cut = truncated and i == len(parts) - 1
                command = f"cat -- {shlex.quote(source)}"
                files.append(_file(f"{probe.path}/{name}", command, 0, body, cut, anon, source))
            continue
        files.append(_file(probe.path, probe.command, status, output, truncated, anon))
    shown = anon.name_for(node) if anon else node
    return files, shown, taken


def _file(
    path: str, command: str, status: int, text: str, truncated: bool, anon: Anonymiser | None, source: str = ""
) -> BundleFile:
    text = text + "\n" if text and not text.endswith("\n") and not truncated else text
    text, removed = scrub_secrets(text)
    if anon is not None:
        text = anon.apply(text)
        command = anon.apply(command)
        source = anon.apply(source)
    return BundleFile(f"files/{path}", command, status, text.encode(), truncated, removed, source)


def _member_names(text: str) -> list[str]:
    """Node names of a cluster from ``/etc/pve/.members`` (pve-cluster's JSON: ``nodelist`` keyed by name)."""
    import json

    try:
        doc = json.loads(text)
    except ValueError:
        return []
    nodelist = doc.get("nodelist") if isinstance(doc, dict) else None
    return [str(n) for n in nodelist] if isinstance(nodelist, dict) else []
