"""The ordered start of a multi-node SGLang replica: rank 0 hosts the rendezvous (torch's store on
``--dist-init-addr``) before any follower starts, and a follower starts only when it reaches that rendezvous.

Readiness is never judged here: rank 0 becomes ready only once every follower joined, and a follower's ``/health``
answers 200 whatever the group's state (:class:`~gpuhost.operations.sglang.SglangReady` waits on rank 0 alone).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from pydantic import Field

from gpuhost.core.actions import WaitUntil
from gpuhost.core.operation import Args, Operation, SkipTask
from gpuhost.core.plan import Plan, nothing
from gpuhost.errors import OperationFailed
from gpuhost.facts import serve_layout as target
from gpuhost.facts.rendezvous import Reach, RendezvousWatch, rendezvous_reach, rendezvous_watch
from gpuhost.facts.serve import serve_service
from gpuhost.serve.logscan import LogScanner
from gpuhost.serve.readiness import crash_text

if TYPE_CHECKING:
    from gpuhost.core.context import HostContext


class RendezvousArgs(Args):
    host: str = Field(description="rank 0's address the members reach (--dist-init-addr's host)")
    port: int = Field(ge=1, le=65535, description="the rendezvous port (--dist-init-addr's port)")
    config_sha256: str | None = Field(
        default=None, description="on rank 0: the configuration this start runs (a stale start never counts)"
    )
    rank0: str = Field(default="rank 0", description="who rank 0 is (node/CT), for messages")
    timeout_s: float = Field(default=900.0, gt=0, description="seconds to wait for the rendezvous to accept")
    poll_s: float = Field(default=2.0, gt=0, description="seconds between polls")
    subject: str = Field(default="sglang", description="subject of the messages (the target's name)")


def listening(watch: RendezvousWatch, rank0: str, where: str) -> str | None:
    """Rank 0's start listens on the rendezvous port (and has not crashed)."""
    return f"{rank0} hosts the rendezvous on {where}" if watch.reach.open and watch.token else None


def rank0_failed(watch: RendezvousWatch, subject: str, where: str) -> str | None:
    """A crash signature in this start's lines, or the unit exited before it listened."""
    scanner = LogScanner(subject)
    for line in watch.lines:
        scanner.feed(line)
    if scanner.fatal:
        return crash_text(subject, scanner)
    if watch.active in ("failed", "inactive"):
        tail = "; ".join(watch.lines[-3:]) or "no output"
        return f"{target.UNIT} is {watch.active} before it listened on {where}; last lines: {tail}"
    return None


def answers(reach: Reach, rank0: str, where: str) -> str | None:
    return f"{rank0}'s rendezvous {where} answers from here" if reach.open else None


def never(_value: object) -> None:
    """A follower's look at rank 0 cannot fail before the timeout: rank 0 may still be starting."""
    return None


class SglangRendezvous(Operation[RendezvousArgs]):
    """On rank 0 (``config_sha256`` given): wait until this start listens on the rendezvous port; fail fast on a
    crash signature in this start's journal or an exited unit. On a follower: wait until rank 0's rendezvous accepts
    a connection from here, or the follower is not started. Read-only: both are waits the runner polls."""

    kind = "sglang_rendezvous"
    Args = RendezvousArgs

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        where = f"{a.host}:{a.port}"
        if a.config_sha256 is None:
            if host.fact(rendezvous_reach, a.host, a.port).open:
                return nothing(f"{a.rank0}'s rendezvous {where} answers from here")
            follower = WaitUntil(
                what=f"{a.rank0}'s rendezvous {where} answers from here",
                fact=rendezvous_reach,
                args=(a.host, a.port),
                done=partial(answers, rank0=a.rank0, where=where),
                failed=never,
                explain=lambda r: r.error or "no answer",
                hint=(
                    f"{a.rank0} is not running (see its node's tasks), or this node cannot reach it on port {a.port}; "
                    "the follower was not started"
                ),
                timeout=a.timeout_s,
                poll=a.poll_s,
                step=f"{a.subject} rendezvous",
            )
            return Plan(reason=f"wait for {a.rank0}'s rendezvous on {where}", actions=[follower])
        state = host.fact(serve_service)
        if state.launched.get("config_sha256") not in (a.config_sha256, None) and not host.check:
            raise SkipTask("not waited for: the server runs an older configuration (restart pending)")
        if state.token is None and not host.check:
            raise OperationFailed(f"{target.MARKER_FILE} is missing: the server was not started by gpuhost")
        rank0 = WaitUntil(
            what=f"{a.rank0} listens on its rendezvous {where}",
            fact=rendezvous_watch,
            args=(a.host, a.port),
            done=partial(listening, rank0=a.rank0, where=where),
            failed=partial(rank0_failed, subject=a.subject, where=where),
            explain=lambda w: w.reach.error or "no answer",
            hint="the followers are not started: gpuhost serve logs",
            timeout=a.timeout_s,
            poll=a.poll_s,
            step=f"{a.subject} rendezvous",
        )
        return Plan(reason=f"wait for {a.rank0}'s rendezvous on {where}", actions=[rank0])
