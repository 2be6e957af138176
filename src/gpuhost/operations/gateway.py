"""Operations of a serving group's gateway (the SGLang Model Gateway, ``smg``) on its host: the service runs this
configuration (a running one restarts only with the operator's consent), its replicas are the group's (changed
through the gateway's worker API, no restart), it routes to every replica it can, and requests through it are
answered and spread over the replicas."""

from __future__ import annotations

import json
import shlex
import time
from functools import partial
from typing import TYPE_CHECKING, Any

from pydantic import Field

from gpuhost.core.actions import RestartService, RunCommand, WaitUntil, WriteFile
from gpuhost.core.operation import Args, Operation
from gpuhost.core.plan import Plan, nothing
from gpuhost.facts import gateway as gw

if TYPE_CHECKING:
    from gpuhost.core.context import HostContext


class GatewayServiceArgs(Args):
    group: str = Field(description="the serving group whose gateway this is")
    config_sha256: str = Field(description="sha256 of the rendered unit, env file and launch script")


class GatewayService(Operation[GatewayServiceArgs]):
    """The group's ``gpuhost-smg-GROUP.service`` runs this configuration. A stopped or failed unit is started; a
    running one with another configuration is restarted only with the operator's consent (``--allow-restart``).
    The replica list is not part of the configuration: a changed one is applied live (``GatewayWorkers``)."""

    kind = "smg_service"
    Args = GatewayServiceArgs

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        unit = gw.unit(a.group)
        state = host.fact(gw.gateway_service, a.group)
        running = state.active in ("active", "activating", "reloading")
        if running and state.config_sha256 == a.config_sha256:
            return nothing(f"{unit} runs this configuration")
        record = {"config_sha256": a.config_sha256, "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        return Plan(
            reason=f"{'restart' if running else 'start'} {unit}"
            + ("" if running or state.active in ("inactive", "unknown") else f", was {state.active}"),
            actions=[
                WriteFile(gw.state_file(a.group), json.dumps(record, sort_keys=True) + "\n", 0o644, backup=False),
                RestartService(unit, f"systemctl restart {unit}")
                if running
                else RunCommand(f"systemctl reset-failed {unit} >/dev/null 2>&1; systemctl restart {unit}"),
            ],
        )


class GatewayWorkersArgs(Args):
    group: str = Field(description="the serving group")
    url: str = Field(description="the gateway's URL on its host (http://HOST:PORT)")
    replicas: tuple[str, ...] = Field(description="the replica URLs the gateway must route to, and no others")
    timeout_s: float = Field(default=60.0, description="seconds to wait for the gateway's worker API to answer")
    poll_s: float = Field(default=1.0, description="seconds between polls")


def answering(st: dict[str, Any]) -> bool:
    """The gateway's worker API answers (``/health`` 200 and a worker list)."""
    return st.get("health") == 200 and st.get("workers") is not None


def _state_said(st: dict[str, Any]) -> str:
    return f"/health {st.get('health') or 'no answer'}" + (f"; {st['error']}" if st.get("error") else "")


def _answers(st: dict[str, Any], url: str) -> str | None:
    return f"the gateway at {url} answers" if answering(st) else None


def _never(_st: dict[str, Any]) -> None:
    """A gateway that does not answer yet may still be starting: only the timeout ends the wait."""
    return None


def _answering_wait(url: str, group: str, timeout_s: float, poll_s: float) -> WaitUntil[dict[str, Any]]:
    return WaitUntil(
        what=f"the gateway at {url} answers",
        fact=gw.gateway_state,
        args=(url, group),
        done=partial(_answers, url=url),
        failed=_never,
        explain=_state_said,
        hint=f"journalctl -u {gw.unit(group)}",
        timeout=timeout_s,
        poll=poll_s,
        step=f"gateway {group}",
    )


class GatewayWorkers(Operation[GatewayWorkersArgs]):
    """The gateway routes to exactly the group's replicas: missing ones are added and others removed through its
    worker API (``POST /workers``, ``DELETE /workers/ID``), so a changed group restarts nothing."""

    kind = "smg_workers"
    Args = GatewayWorkersArgs

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        cmd = gw.probe_command(a.url, "sync", a.group, tuple(x for r in a.replicas for x in ("--want", r)))
        check = (
            "import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); "
            "e=d.get('error'); e and print('gateway worker API: '+e, file=sys.stderr); sys.exit(1 if e else 0)"
        )
        sync = RunCommand(f"{cmd} | python3 -c {shlex.quote(check)}")
        want = {r.rstrip("/") for r in a.replicas}
        st = host.fact(gw.gateway_state, a.url, a.group)
        if not answering(st):  # just (re)started: wait for its worker API, then make its replicas the group's
            return Plan(
                reason=f"the gateway does not answer yet ({_state_said(st)}): wait for it, then make its replicas "
                f"{' '.join(sorted(want))}",
                actions=[_answering_wait(a.url, a.group, a.timeout_s, a.poll_s), sync],
            )
        have = {str(w["url"]).rstrip("/") for w in st["workers"]}
        if have == want:
            return nothing(f"routes to {len(want)} replicas")
        add, drop = sorted(want - have), sorted(have - want)
        return Plan(
            reason=", ".join(
                part
                for part in (f"add {' '.join(add)}" if add else "", f"remove {' '.join(drop)}" if drop else "")
                if part
            ),
            actions=[sync],
        )


class GatewayReadyArgs(Args):
    group: str = Field(description="the serving group")
    url: str = Field(description="the gateway's URL on its host (http://HOST:PORT)")
    replicas: tuple[str, ...] = Field(description="the replica URLs that must be healthy in the gateway")
    timeout_s: float = Field(default=120.0, description="seconds to wait for every replica to be healthy")
    poll_s: float = Field(default=1.0, description="seconds between polls")


class GatewayReady(Operation[GatewayReadyArgs]):
    """The gateway answers, its own health checks count every replica healthy and it routes to no other (a removal
    is applied in the background), within the timeout; read-only."""

    kind = "smg_ready"
    Args = GatewayReadyArgs

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        want = tuple(sorted(r.rstrip("/") for r in a.replicas))
        wait = WaitUntil(
            what=f"{a.url} routes to its {len(want)} replicas, each healthy, and to no other",
            fact=gw.gateway_state,
            args=(a.url, a.group),
            done=partial(routed, want=want, url=a.url),
            failed=_never,
            explain=partial(routing_said, want=want),
            hint=f"journalctl -u {gw.unit(a.group)}",
            timeout=a.timeout_s,
            poll=a.poll_s,
            step=f"gateway {a.group}",
        )
        return Plan(reason=f"wait for {len(want)} healthy replicas behind {a.url}", actions=[wait])


def _listed(st: dict[str, Any]) -> dict[str, bool]:
    return {str(w["url"]).rstrip("/"): bool(w.get("healthy")) for w in st.get("workers") or []}


def routed(st: dict[str, Any], want: tuple[str, ...], url: str) -> str | None:
    """Every replica healthy in the gateway's own checks and no other routed to (a removal applies in the
    background: it is waited for too)."""
    if not answering(st):
        return None
    listed = _listed(st)
    if any(not listed.get(u) for u in want) or set(listed) - set(want):
        return None
    return f"{url} up, {len(want)}/{len(want)} replicas healthy"


def routing_said(st: dict[str, Any], want: tuple[str, ...]) -> str:
    if not answering(st):
        return _state_said(st)
    listed = _listed(st)
    missing = [u for u in want if not listed.get(u)]
    extra = sorted(set(listed) - set(want))
    return (
        f"{len(want) - len(missing)}/{len(want)} replicas healthy"
        + (f"; not healthy: {', '.join(missing)}" if missing else "")
        + (f"; still routed to: {', '.join(extra)}" if extra else "")
    )
