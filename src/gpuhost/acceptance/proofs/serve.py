"""Serving proofs: each container with a ``serve:`` entry (``gpuhost launch sglang``), through ``pct exec``.

The unit is active; the shipped probe (``gpuhost/tools/serve_probe.py``, run in the container once per server)
finds ``/health`` 200, a smoke completion, the accuracy canary with finite log-probabilities, ``/server_info``
showing the launch settings the profile asked for (recorded at launch in ``launched.json``), and single-stream
speed (INFO). Every judgment is a :mod:`gpuhost.checks.serve` check.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuhost.acceptance.proof import Proof, ProofFailed, ProofSkipped, Prover, Subject, Suite, reachable
from gpuhost.checks import serve as checks
from gpuhost.checks.finding import Finding
from gpuhost.facts import serve_layout


@dataclass(frozen=True)
class Server:
    subject: str
    active: str
    launched: dict[str, Any]
    probe: dict[str, Any]

    @property
    def expect(self) -> dict[str, str]:
        e = self.launched.get("expect")
        return dict(e) if isinstance(e, dict) else {}


def read_server(s: Subject) -> Server:
    """The unit's state and, when it is active, the probe's answers (one command each)."""
    from gpuhost.acceptance.connections import node_connection
    from gpuhost.serve.service import probe_on, service_state

    node, ctid = s.key

    def read() -> Server:
        conn = node_connection(node)
        active, _token, launched = service_state(conn, ctid)
        data: dict[str, Any] = {"health": None, "error": f"{serve_layout.UNIT} is {active}"}
        if active == "active":
            data, launched = probe_on(conn, ctid, "verify", launched)
        return Server(f"{node}/CT {ctid}", active, launched, data)

    return reachable(read)


def _judged(judge: Callable[[Server], list[Finding]]) -> Callable[[Subject, Prover], None]:
    def run(s: Subject, prove: Prover) -> None:
        prove(judge(s.read(read_server)))

    return run


def _server_info(s: Subject, prove: Prover) -> None:
    server = s.read(read_server)
    if not server.expect:
        raise ProofFailed(
            f"serve.server-info {server.subject}: no launch expectation recorded "
            f"({serve_layout.STATE_FILE}: not launched by gpuhost launch sglang)"
        )
    if server.probe.get("health") != 200:  # nothing to read: serve.health already failed, and says why
        why = server.probe.get("error") or "see serve.health"
        raise ProofSkipped(f"serve.server-info: not read, the server is not healthy ({why})")
    prove(checks.check_server_info(server.probe, server.expect, server.subject))


def _speed(s: Subject, prove: Prover) -> None:
    server = s.read(read_server)
    found = checks.check_speed(server.probe, server.subject)
    if not found:
        raise ProofSkipped("serve.speed: the probe made no streamed request (server not healthy)")
    prove(found)


NEEDS = (read_server,)
SUITE = Suite(
    "serve",
    "test_serve.py",
    "servers",
    (
        Proof("unit", _judged(lambda v: checks.check_unit(v.active, v.subject, serve_layout.UNIT)), NEEDS),
        Proof("health", _judged(lambda v: checks.check_health(v.probe, v.subject)), NEEDS),
        Proof("smoke", _judged(lambda v: checks.check_smoke(v.probe, v.subject)), NEEDS),
        Proof("canary", _judged(lambda v: checks.check_canary(v.probe, v.subject)), NEEDS),
        Proof("logprobs", _judged(lambda v: checks.check_logprobs(v.probe, v.subject)), NEEDS),
        Proof("server_info", _server_info, NEEDS),
        Proof("speed", _speed, NEEDS),
    ),
)
