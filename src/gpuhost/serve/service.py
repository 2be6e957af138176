"""Operate launched SGLang servers at any time: status, logs, stop, restart, and the probe that ``gpuhost verify
serve`` (the serve part of the acceptance suite) judges with :mod:`gpuhost.checks.serve`.

The servers are the containers with a ``serve:`` entry; what runs there is read from the state gpuhost left on the
target (``/var/lib/gpuhost/sglang/launched.json``). HTTP to the server runs on the target (the probe is shipped
with :func:`gpuhost.connection.shipped_tool.run_tool`), because the server listens inside the container.
"""

from __future__ import annotations

import json
import secrets
import shlex
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from gpuhost.checks.finding import Finding, Level, worst
from gpuhost.checks.serve import serve_findings
from gpuhost.connection.base import Connection
from gpuhost.errors import ConfigError, GpuhostError
from gpuhost.facts import serve_layout as target
from gpuhost.facts.serve import journal_command, parse_gpus, parse_service
from gpuhost.inventory.loader import Inventory
from gpuhost.inventory.models import NodeSpec
from gpuhost.resources import read_tool


@dataclass(frozen=True)
class ServeTarget:
    node: str
    ctid: int

    @property
    def subject(self) -> str:
        return f"{self.node}/CT {self.ctid}"


def targets(inventory: Inventory, *, limit: str | None = None, ctids: list[int] | None = None) -> list[ServeTarget]:
    names = inventory.select(limit) if limit is not None else list(inventory.nodes)
    out = [
        ServeTarget(n, ctid)
        for n in names
        for ctid, ct in inventory.nodes[n].containers.items()
        if ct.serve is not None and (not ctids or ctid in ctids)
    ]
    if not out:
        which = f" among --ctid {', '.join(map(str, ctids))}" if ctids else ""
        raise ConfigError(f"no container with a serve: entry in {inventory.path}{which}")
    return out


@contextmanager
def _ct(inventory: Inventory, t: ServeTarget, connect: Callable[[NodeSpec], Connection]) -> Iterator[Connection]:
    from gpuhost.connection.pct import PctConnection

    with connect(inventory.nodes[t.node]) as conn:
        yield PctConnection(conn, t.ctid)


#: Holds a node's run lock over a connection while a block runs (``runner.node_lock.held_on``, given by the caller).
NodeLock = Callable[[NodeSpec, Connection, float], AbstractContextManager[None]]


@contextmanager
def _ct_locked(
    inventory: Inventory,
    t: ServeTarget,
    connect: Callable[[NodeSpec], Connection],
    lock: NodeLock,
    lock_wait: float,
) -> Iterator[Connection]:
    """The container, with its node's run lock held: a stop or restart never runs while a gpuhost run changes the
    node, and the next run waits for it."""
    from gpuhost.connection.pct import PctConnection

    node = inventory.nodes[t.node]
    with connect(node) as conn, lock(node, conn, lock_wait):
        yield PctConnection(conn, t.ctid)


def _require_ct(ct: Connection, t: ServeTarget) -> None:
    """A container that is not there (or not running) is said so, not shown as a server with zeros."""
    node = getattr(ct, "node", None)
    if node is None:
        return
    r = node.run(f"pct status {t.ctid}", check=False)
    if r.exit_code != 0:
        said = (r.stderr.strip() or r.stdout.strip()).splitlines()
        raise GpuhostError(
            f"CT {t.ctid} does not exist on {t.node} ({said[-1] if said else f'pct status exit {r.exit_code}'}): "
            "create it with gpuhost provision lxc, or fix the inventory's containers"
        )
    if "running" not in r.stdout:
        raise GpuhostError(f"CT {t.ctid} on {t.node} is not running ({r.stdout.strip()}): pct start {t.ctid}")


def _state(ct: Connection) -> tuple[str, str | None, dict[str, Any]]:
    from gpuhost.facts.serve import _service_command

    s = parse_service(ct.run(_service_command(), check=False))
    return s.active, s.token, s.launched


def probe(
    inventory: Inventory, t: ServeTarget, mode: str, connect: Callable[[NodeSpec], Connection]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(probe output, launched state) of one server, over a connection of its own."""
    with connect(inventory.nodes[t.node]) as conn:
        return probe_on(conn, t.ctid, mode)


def probe_on(
    conn: Connection, ctid: int, mode: str, launched: dict[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(probe output, launched state) of the server in container ``ctid`` of the node ``conn`` reaches:
    the shipped probe runs in the container (modes: health, verify, info) in one round trip. ``launched``: the
    state the caller read already (:func:`service_state`), else it is read first."""
    from gpuhost.connection.pct import PctConnection
    from gpuhost.connection.shipped_tool import run_inline

    if launched is None:
        _active, _token, launched = _state(PctConnection(conn, ctid))
    url = str(launched.get("url") or "")
    if not url:
        return {"health": None, "error": "not launched by gpuhost (no state on the target)"}, launched
    model = str(launched.get("served_model") or "default")
    out = run_inline(
        conn,
        "serve_probe.py",
        [url, mode, "--env-file", target.ENV_FILE, "--model", model, "--timeout", "300"],
        ctid=ctid,
        timeout=1800,
    )
    data = out.data if isinstance(out.data, dict) else {"health": None, "error": "probe printed no object"}
    return data, launched


def service_state(conn: Connection, ctid: int) -> tuple[str, str | None, dict[str, Any]]:
    """(unit state, start token, launched state) of the server in container ``ctid``."""
    from gpuhost.connection.pct import PctConnection

    return _state(PctConnection(conn, ctid))


def status(
    inventory: Inventory,
    *,
    limit: str | None = None,
    ctids: list[int] | None = None,
    connect: Callable[[NodeSpec], Connection],
) -> list[dict[str, Any]]:
    """Unit state, health, profile, uptime and GPU memory in use, per server (nothing secret)."""
    rows = []
    for t in targets(inventory, limit=limit, ctids=ctids):
        row: dict[str, Any] = {"target": t.subject}
        try:
            with _ct(inventory, t, connect) as ct:
                _require_ct(ct, t)
                active, token, launched = _state(ct)
                # the start marker's age on the target's own clock (no skew with this machine)
                clock = ct.run(f"date +%s; stat -c %Y {target.MARKER_FILE}", check=False).stdout.split()
                gpus = parse_gpus(
                    ct.run(
                        "nvidia-smi --query-gpu=compute_cap,driver_version,memory.used,memory.total "
                        "--format=csv,noheader,nounits",
                        check=False,
                    )
                )
            data, _ = probe(inventory, t, "health", connect) if launched.get("url") else ({"health": None}, {})
            now, started = (
                (int(clock[0]), int(clock[1])) if len(clock) == 2 and all(c.isdigit() for c in clock) else (0, 0)
            )
            row.update(
                unit=active,
                health=data.get("health"),
                profile=launched.get("profile"),
                sglang=launched.get("sglang"),
                model=launched.get("model"),
                url=launched.get("url"),
                started_at=launched.get("started_at"),
                uptime_s=(now - started) if active == "active" and started else None,
                gpu_memory_used_mib=sum(g.memory_used_mib or 0 for g in gpus),
                gpu_memory_total_mib=sum(g.memory_total_mib or 0 for g in gpus),
                gpus=len(gpus),
                start_token=token,
                multinode=launched.get("multinode"),
            )
        except GpuhostError as exc:
            row["error"] = str(exc)
        rows.append(row)
    return rows


def logs(
    inventory: Inventory,
    t: ServeTarget,
    *,
    whole: bool = False,
    lines: int | None = None,
    connect: Callable[[NodeSpec], Connection],
) -> list[str]:
    """The journal since the current start (or all of it with ``whole``); the last ``lines`` of it."""
    with _ct(inventory, t, connect) as ct:
        _active, token, _launched = _state(ct)
        text = ct.run(journal_command(), check=False).stdout
    out = text.splitlines() if whole or token is None else (target.lines_of_start(text, token) or [])
    return out[-lines:] if lines else out


def whole_replicas(inventory: Inventory, ts: list[ServeTarget]) -> list[ServeTarget]:
    """The targets with each multi-node replica they touch made whole, in rank order: stopping rank 0 stops its group
    (its followers end with it), and a restart starts rank 0 before its followers."""
    from gpuhost.inventory.loader import members_of

    out: list[ServeTarget] = []
    for t in ts:
        for node, ctid in members_of(inventory, t.node, t.ctid) or [(t.node, t.ctid)]:
            if ServeTarget(node, ctid) not in out:
                out.append(ServeTarget(node, ctid))
    return out


def label(inventory: Inventory, t: ServeTarget) -> str:
    """``node/CT id``, with its rank for a member of a multi-node replica."""
    from gpuhost.inventory.loader import members_of

    members = members_of(inventory, t.node, t.ctid)
    if not members:
        return t.subject
    rank = members.index((t.node, t.ctid))
    return f"{t.subject} (rank {rank} of {len(members)})"


def control(
    inventory: Inventory,
    t: ServeTarget,
    action: Literal["stop", "restart"],
    connect: Callable[[NodeSpec], Connection],
    *,
    lock: NodeLock,
    lock_wait: float = 10.0,
) -> str:
    """Under the node's run lock, ``systemctl stop`` (``action="stop"``), or a new start marker and state, then
    ``systemctl restart`` (``"restart"``; readiness: ``gpuhost launch sglang``); the unit's state after."""
    with _ct_locked(inventory, t, connect, lock, lock_wait) as ct:
        if action == "stop":
            ct.run(f"systemctl stop {target.UNIT}", timeout=300)
        else:
            _restart(ct, t)
        active, _, _ = _state(ct)
    return active


def _restart(ct: Connection, t: ServeTarget) -> None:
    """A new start marker and state for the server gpuhost launched in ``ct``, then ``systemctl restart``."""
    _active, _token, launched = _state(ct)
    if not launched:
        raise ConfigError(f"{t.subject}: no server launched by gpuhost to restart (gpuhost launch sglang)")
    token = secrets.token_hex(16)
    launched.update(
        token=token,
        started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        started_epoch=int(time.time()),
    )
    ct.write_file(target.MARKER_FILE, token + "\n", mode=0o644, backup=False)
    ct.write_file(target.STATE_FILE, json.dumps(launched, indent=1, sort_keys=True) + "\n", mode=0o644, backup=False)
    ct.run(f"systemctl reset-failed {shlex.quote(target.UNIT)} >/dev/null 2>&1; systemctl restart {target.UNIT}")


@dataclass
class GroupReport:
    """What ``verify serve --group`` found: each replica's findings, then the gateway's."""

    findings: list[Finding] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 1 if worst(self.findings) >= Level.FAIL else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": "gpuhost.verify/2",
            "kind": "serve-group",
            "ok": self.exit_code == 0,
            "exit_code": self.exit_code,
            "findings": [f.to_json() for f in self.findings],
        }


def verify_group(
    inventory: Inventory,
    group: str,
    *,
    requests: int = 0,
    connect: Callable[[NodeSpec], Connection],
) -> GroupReport:
    """``gpuhost verify serve --group``: each replica as ``verify serve`` checks it, then the gateway end to end (on
    its node): every replica healthy in it (a dead one named), requests through it answered and reaching replicas."""
    from gpuhost.checks.gateway import gateway_findings
    from gpuhost.connection.shipped_tool import run_tool
    from gpuhost.facts import gateway as gw
    from gpuhost.inventory.loader import serving_vars

    resolved = serving_vars(inventory).get(group)
    if resolved is None:
        known = ", ".join(inventory.serving.groups) or "none"
        raise ConfigError(f"no serving group '{group}' in {inventory.path} (known: {known})")
    report = GroupReport()
    replicas = {str(r["url"]): f"{r['node']}/CT {r['ctid']}" for r in resolved["replicas"]}
    for r in resolved["replicas"]:
        t = ServeTarget(str(r["node"]), int(r["ctid"]))
        try:
            data, launched = probe(inventory, t, "verify", connect)
            expect = launched.get("expect")
            report.findings += serve_findings(data, t.subject, expect if isinstance(expect, dict) else None)
        except GpuhostError as exc:
            report.findings.append(Finding(Level.FAIL, "reachable", t.subject, str(exc)))
    g = resolved["gateway"]
    if g is None:  # a group without a gateway: its replicas are all there is to prove
        return report
    url = target.probe_url(str(g["host"]), int(g["port"]))
    subject = f"{g['node']}/gateway {group}"
    model = _served_model(inventory, resolved)
    n = requests or 3 * len(replicas)
    try:
        with connect(inventory.nodes[str(g["node"])]) as conn:

            def ask(args: list[str]) -> dict[str, Any]:
                out = run_tool(conn, read_tool("gateway_probe.py").encode(), args, name="gateway_probe.py", timeout=900)
                return out.data if isinstance(out.data, dict) else {"health": None, "error": "probe printed nothing"}

            env = ["--env-file", gw.env_file(group)]
            state = ask([url, "state", *env])
            live = [
                u for u in replicas if any(w.get("url") == u and w.get("healthy") for w in state.get("workers") or [])
            ]
            spread = None
            if state.get("health") == 200:
                extra = [x for u in live for x in ("--replica", u)]
                spread = ask([url, "spread", *env, "--model", model, "--requests", str(n), *extra])
        report.findings += gateway_findings(
            subject, url, state, spread, replicas, every_replica=g.get("policy") == "round_robin"
        )
    except GpuhostError as exc:
        report.findings.append(Finding(Level.FAIL, "reachable", subject, str(exc)))
    return report


def _served_model(inventory: Inventory, resolved: dict[str, Any]) -> str:
    """The model name requests through the gateway ask for: the first replica's ``--served-model-name``."""
    from pathlib import Path

    from gpuhost.serve.profile import get_profile, served_model_name

    dirs = inventory.vars.get("sglang_profile_dirs") or []
    try:
        profile = get_profile(str(resolved["replicas"][0]["profile"]), [Path(d) for d in dirs])
    except GpuhostError:
        return str(resolved["replicas"][0].get("model") or "default")
    return served_model_name(profile, resolved["replicas"][0].get("model"))
