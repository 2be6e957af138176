"""Operations of a serving group's gateway (the SGLang Model Gateway, ``smg``) on its host: the service runs this
configuration (a running one restarts only with the operator's consent), its replicas are the group's (changed
through the gateway's worker API, no restart), it routes to every replica it can, and requests through it are
answered and spread over the replicas."""

from __future__ import annotations

import json
import logging
import shlex
import time
from typing import TYPE_CHECKING

from pydantic import Field

from gpuhost.core.actions import RestartService, RunCommand, WriteFile
from gpuhost.core.operation import Args, Operation, SkipTask
from gpuhost.core.plan import Plan, nothing
from gpuhost.errors import OperationFailed
from gpuhost.facts import gateway as gw

if TYPE_CHECKING:
    from gpuhost.core.context import HostContext

progress = logging.getLogger("gpuhost.progress")


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
        state = host.fact(gw.gateway_service, a.group, 0)
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


def _wait_state(host: HostContext, url: str, group: str, timeout_s: float, poll_s: float) -> dict[str, object]:
    start = time.monotonic()
    nonce = 0
    while True:
        nonce += 1
        st = host.fact(gw.gateway_state, url, group, time.monotonic_ns() + nonce)
        if st.get("health") == 200 and st.get("workers") is not None:
            return st
        if time.monotonic() - start > timeout_s:
            raise OperationFailed(
                f"the gateway at {url} does not answer (/health {st.get('health') or 'no answer'}"
                f"{'; ' + str(st['error']) if st.get('error') else ''}); journalctl -u {gw.unit(group)}"
            )
        time.sleep(poll_s)


class GatewayWorkers(Operation[GatewayWorkersArgs]):
    """The gateway routes to exactly the group's replicas: missing ones are added and others removed through its
    worker API (``POST /workers``, ``DELETE /workers/ID``), so a changed group restarts nothing."""

    kind = "smg_workers"
    Args = GatewayWorkersArgs

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        if host.check:
            raise SkipTask(f"check mode: would make the gateway's replicas {', '.join(a.replicas)}")
        st = _wait_state(host, a.url, a.group, a.timeout_s, a.poll_s)
        have = {str(w["url"]).rstrip("/") for w in st["workers"]}  # type: ignore[attr-defined]
        want = {r.rstrip("/") for r in a.replicas}
        if have == want:
            return nothing(f"routes to {len(want)} replicas")
        add, drop = sorted(want - have), sorted(have - want)
        cmd = gw.probe_command(a.url, "sync", a.group, tuple(x for r in a.replicas for x in ("--want", r)))
        check = (
            "import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); "
            "e=d.get('error'); e and print('gateway worker API: '+e, file=sys.stderr); sys.exit(1 if e else 0)"
        )
        return Plan(
            reason=", ".join(
                part
                for part in (f"add {' '.join(add)}" if add else "", f"remove {' '.join(drop)}" if drop else "")
                if part
            ),
            actions=[RunCommand(f"{cmd} | python3 -c {shlex.quote(check)}")],
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
        if host.check:
            raise SkipTask(f"check mode: would wait for {len(a.replicas)} healthy replicas behind {a.url}")
        start = time.monotonic()
        want = {r.rstrip("/") for r in a.replicas}
        while True:
            st = _wait_state(host, a.url, a.group, a.timeout_s, a.poll_s)
            listed = {str(w["url"]).rstrip("/"): bool(w.get("healthy")) for w in st["workers"]}  # type: ignore[attr-defined]
            missing = sorted(u for u in want if not listed.get(u))
            extra = sorted(set(listed) - want)  # a removal is applied in the background: wait for it too
            if not missing and not extra:
                return nothing(
                    f"{a.url} up, {len(want)}/{len(want)} replicas healthy ({time.monotonic() - start:.0f} s)"
                )
            if time.monotonic() - start > a.timeout_s:
                raise OperationFailed(
                    f"gateway {a.url}: {len(want) - len(missing)}/{len(want)} replicas healthy"
                    + (f"; not healthy: {', '.join(missing)}" if missing else "")
                    + (f"; still routed to: {', '.join(extra)}" if extra else "")
                )
            time.sleep(a.poll_s)
