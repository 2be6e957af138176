"""Whether a multi-node replica's rendezvous (rank 0's ``--dist-init-addr HOST:PORT``) accepts connections, seen from
the target: a TCP connect that is closed at once (torch's store drops a client that sends nothing; it never counts
as a rank), and, on rank 0 itself, the server's journal and unit state in the same round trip.

Read-only and live: never cached, each ask (a wait's every look) reads anew.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from gpuhost.core.facts import Fact
from gpuhost.core.result import CommandResult
from gpuhost.facts import serve_layout as target
from gpuhost.facts.batch import parse_sections, sections_command
from gpuhost.facts.serve import journal_command

_CONNECT = (
    "import socket, sys\n"
    "try:\n"
    "    socket.create_connection((sys.argv[1], int(sys.argv[2])), 3).close()\n"
    "    print('open')\n"
    "except OSError as exc:\n"
    "    print('closed', exc.strerror or exc)\n"
)


def _connect_command(host: str, port: int) -> str:
    return f"python3 -c {shlex.quote(_CONNECT)} {shlex.quote(host)} {port}"


@dataclass(frozen=True)
class Reach:
    """One look at the rendezvous port: open, or why not (``connection refused``)."""

    open: bool
    error: str | None


def parse_reach(text: str) -> Reach:
    last = text.strip().splitlines()[-1] if text.strip() else ""
    if last == "open":
        return Reach(True, None)
    why = last.removeprefix("closed").strip() if last.startswith("closed") else ""
    return Reach(False, (why or "no answer").lower())


#: args: host, port
rendezvous_reach: Fact[Reach] = Fact(
    "rendezvous port", _connect_command, lambda r, *_a: parse_reach(r.stdout + r.stderr), live=True
)


@dataclass(frozen=True)
class RendezvousWatch:
    """One poll on rank 0 while its rendezvous comes up: the journal, the unit's state and the port."""

    journal: str
    active: str
    reach: Reach
    token: str | None = None

    @property
    def lines(self) -> list[str]:
        """This start's journal lines (none before its marker is in the journal)."""
        return (target.lines_of_start(self.journal, self.token) if self.token else None) or []


def _watch_command(host: str, port: int) -> str:
    return sections_command(
        {
            "marker": f"cat {target.MARKER_FILE}",
            "journal": journal_command(),
            "active": f"systemctl is-active {target.UNIT}",
            "reach": _connect_command(host, port),
        }
    )


def parse_watch(result: CommandResult, *_args: Any) -> RendezvousWatch:
    s = parse_sections(result.stdout)
    journal = s["journal"].output if "journal" in s else ""
    active = s["active"].output.strip() if "active" in s and s["active"].output.strip() else "unknown"
    reach = parse_reach(s["reach"].output) if "reach" in s else Reach(False, "no answer")
    token = s["marker"].output.strip() if "marker" in s and s["marker"].ok else None
    return RendezvousWatch(journal, active, reach, token if token and target.valid_token(token) else None)


#: args: host, port
rendezvous_watch: Fact[RendezvousWatch] = Fact("rank 0's rendezvous", _watch_command, parse_watch, live=True)
