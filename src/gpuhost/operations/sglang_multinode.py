"""The ordered start of a multi-node SGLang replica: rank 0 hosts the rendezvous (torch's store on
``--dist-init-addr``) before any follower starts, and a follower starts only when it reaches that rendezvous.

Readiness is never judged here: rank 0 becomes ready only once every follower joined, and a follower's ``/health``
answers 200 whatever the group's state (:class:`~gpuhost.operations.sglang.SglangReady` waits on rank 0 alone).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from pydantic import Field

from gpuhost.core.operation import Args, Operation, SkipTask
from gpuhost.core.plan import Plan, nothing
from gpuhost.core.progress import report
from gpuhost.errors import OperationFailed
from gpuhost.facts import serve_layout as target
from gpuhost.facts.rendezvous import rendezvous_reach, rendezvous_watch
from gpuhost.facts.serve import serve_service
from gpuhost.operations.sglang import CRASH_GRACE_S, crash_text, elapsed
from gpuhost.serve.logscan import LogScanner

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


class SglangRendezvous(Operation[RendezvousArgs]):
    """On rank 0 (``config_sha256`` given): wait until this start listens on the rendezvous port; fail fast on a
    crash signature in this start's journal or an exited unit. On a follower: rank 0's rendezvous accepts a
    connection from here, or the follower is not started. Read-only."""

    kind = "sglang_rendezvous"
    Args = RendezvousArgs

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        where = f"{a.host}:{a.port}"
        if host.check:
            raise SkipTask(f"check mode: would wait for {a.rank0}'s rendezvous on {where}")
        if a.config_sha256 is None:
            return self._reached(host, a, where)
        state = host.fact(serve_service, 0)
        if state.launched.get("config_sha256") != a.config_sha256:
            raise SkipTask("not waited for: the server runs an older configuration (restart pending)")
        if state.token is None:
            raise OperationFailed(f"{target.MARKER_FILE} is missing: the server was not started by gpuhost")
        scanner = LogScanner(a.subject)
        fed, start, ended, nonce = 0, time.monotonic(), False, 0
        fatal_since: float | None = None
        while True:
            nonce += 1
            watch = host.fact(rendezvous_watch, a.host, a.port, time.monotonic_ns() + nonce)
            now = time.monotonic()
            lines = target.lines_of_start(watch.journal, state.token) or []
            for line in lines[fed:]:
                scanner.feed(line)
            fed = len(lines)
            if any(h.fatal for h in scanner.report()):
                fatal_since = fatal_since or now
                if now - fatal_since >= CRASH_GRACE_S or watch.active in ("failed", "inactive"):
                    raise OperationFailed(crash_text(a.subject, scanner, now - start))
            elif watch.reach.open:
                return nothing(f"{a.rank0} hosts the rendezvous on {where} ({elapsed(now - start)} after its start)")
            elif watch.active in ("failed", "inactive"):
                if not ended:  # the journal was read before the unit's state: read it once more, complete
                    ended = True
                    continue
                tail = "; ".join(lines[-3:]) or "no output"
                raise OperationFailed(
                    f"{target.UNIT} is {watch.active} before it listened on {where}; last lines: {tail}"
                )
            if now - start > a.timeout_s:
                raise OperationFailed(
                    f"{a.rank0} does not listen on {where} after {elapsed(a.timeout_s)} ({watch.reach.error}); the "
                    "followers are not started: gpuhost serve logs"
                )
            report(host.name, f"{a.subject} rendezvous", f"waiting for {where}", now - start, update=True)
            time.sleep(a.poll_s)

    def _reached(self, host: HostContext, a: RendezvousArgs, where: str) -> Plan:
        start, nonce = time.monotonic(), 0
        while True:
            nonce += 1
            reach = host.fact(rendezvous_reach, a.host, a.port, time.monotonic_ns() + nonce)
            if reach.open:
                return nothing(f"{a.rank0}'s rendezvous {where} answers from here")
            if time.monotonic() - start > a.timeout_s:
                raise OperationFailed(
                    f"{a.rank0}'s rendezvous {where} does not answer from here ({reach.error}) after "
                    f"{elapsed(a.timeout_s)}: {a.rank0} is not running (see its node's tasks), or this node cannot "
                    f"reach it on port {a.port}; the follower was not started"
                )
            time.sleep(a.poll_s)
