"""Judging a serving group's gateway from what its probe saw (``gpuhost.tools.gateway_probe``): the gateway
answers, every replica is healthy in it (a dead one is named), requests through it are answered and reach the
replicas (each replica's own request counter). Pure: observations in, findings out."""

from __future__ import annotations

from typing import Any

from gpuhost.checks.finding import Finding, Level


def gateway_findings(
    subject: str,
    url: str,
    state: dict[str, Any],
    spread: dict[str, Any] | None,
    replicas: dict[str, str],
    *,
    every_replica: bool = False,
) -> list[Finding]:
    """``replicas``: URL → name (NODE/CT N). ``every_replica``: the policy spreads (round_robin), so a healthy
    replica that got no request is a failure."""
    out: list[Finding] = []
    if state.get("health") != 200 or state.get("workers") is None:
        why = state.get("error") or f"/health {state.get('health') or 'no answer'}"
        return [
            Finding(
                Level.FAIL,
                "gateway.up",
                subject,
                f"the gateway at {url} does not answer ({why})",
                fix="journalctl -u gpuhost-smg-*.service on its node; gpuhost launch sglang --group",
            )
        ]
    out.append(Finding(Level.PASS, "gateway.up", subject, f"the gateway at {url} answers"))
    known = {str(w.get("url", "")).rstrip("/"): w for w in state["workers"]}
    for rurl, name in replicas.items():
        w = known.get(rurl)
        if w is None:
            out.append(
                Finding(
                    Level.FAIL,
                    "gateway.replica",
                    subject,
                    f"{name} ({rurl}) is not among the gateway's replicas",
                    fix="gpuhost launch sglang --group (the gateway's replicas are made the group's)",
                )
            )
        elif not w.get("healthy"):
            out.append(
                Finding(
                    Level.FAIL,
                    "gateway.replica",
                    subject,
                    f"{name} ({rurl}) is taken out by the gateway's health checks (status {w.get('status')})",
                    cause="the replica does not answer the gateway's health check",
                    fix=f"gpuhost serve status --ctid {name.rsplit(' ', 1)[-1]}; gpuhost serve logs",
                )
            )
        else:
            out.append(Finding(Level.PASS, "gateway.replica", subject, f"{name} ({rurl}) healthy in the gateway"))
    extra = sorted(set(known) - set(replicas))
    if extra:
        out.append(Finding(Level.WARN, "gateway.replica", subject, f"the gateway also routes to {', '.join(extra)}"))
    if spread is None:
        return out
    statuses = spread.get("statuses") or []
    ok = sum(1 for s in statuses if s == 200)
    n = len(statuses)
    served = spread.get("served") or {}
    live = [u for u in replicas if known.get(u, {}).get("healthy")]
    by = ", ".join(f"{replicas[u]}: {served[u] if served.get(u) is not None else '?'}" for u in live)
    if n == 0 or ok < n:
        out.append(
            Finding(
                Level.FAIL,
                "gateway.requests",
                subject,
                f"{ok}/{n} requests through {url} answered (statuses {sorted({str(s) for s in statuses})})",
                fix="gpuhost verify serve on each replica; journalctl -u gpuhost-smg-*.service",
            )
        )
        return out
    reached = sum(v for v in served.values() if isinstance(v, int))
    if live and all(served.get(u) is None for u in live):
        out.append(
            Finding(
                Level.WARN,
                "gateway.requests",
                subject,
                f"{ok}/{n} requests through {url} answered; which replica served them is unknown",
                cause="the replicas expose no sglang:num_requests_total (--enable-metrics)",
            )
        )
        return out
    idle = [replicas[u] for u in live if served.get(u) == 0]
    if reached < ok:
        out.append(
            Finding(
                Level.FAIL,
                "gateway.requests",
                subject,
                f"{ok}/{n} requests through {url} answered but the replicas counted {reached} ({by})",
            )
        )
    elif every_replica and idle and len(live) > 1:
        out.append(
            Finding(
                Level.FAIL,
                "gateway.requests",
                subject,
                f"{ok}/{n} requests through {url} answered but not spread: {', '.join(idle)} got none ({by})",
            )
        )
    else:
        out.append(
            Finding(
                Level.PASS, "gateway.requests", subject, f"{ok}/{n} requests through {url} answered; served by {by}"
            )
        )
    return out
