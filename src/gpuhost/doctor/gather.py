"""Read the whole stack live, in as few round trips as the batched fact read allows, and judge it with the shared
checks: one trip per node (the host facts with every selected guest's status and configuration), one per running
container (its own facts, the server's state and journal), and the serve probe where a server runs.

Nothing here parses a command's output itself: each section is read by the fact that owns that command
(:mod:`gpuhost.facts`), each judgement is a registered check. Read-only: no command changes a host.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from gpuhost.acceptance.expect import host_vars, lxc_vars
from gpuhost.checks import container as ct_checks
from gpuhost.checks import vm as vm_checks
from gpuhost.checks.finding import Finding, Level, check
from gpuhost.checks.serve import (
    check_admission_queueing,
    check_health,
    check_server_info,
    check_unit,
    running_bound,
    tune_levels,
    waiting_at_bound,
)
from gpuhost.checks.table import container_findings, host_findings
from gpuhost.connection.base import Connection
from gpuhost.core.facts import Fact
from gpuhost.core.result import CommandResult
from gpuhost.facts import serve_layout
from gpuhost.facts.batch import ProbeOutput, parse_sections, sections_command
from gpuhost.facts.batchlog import batch_lines
from gpuhost.facts.container import container_probes, parse_container_facts
from gpuhost.facts.host import HOST_PROBES, HostFacts, host_facts_from
from gpuhost.facts.pve import ct_config, ct_status
from gpuhost.facts.serve import journal_command, parse_service, service_probes
from gpuhost.facts.vm import pci_numa_nodes, vm_config, vm_showcmd, vm_status
from gpuhost.inventory.loader import Inventory
from gpuhost.inventory.models import NodeSpec
from gpuhost.roles.lxc_gpu import container_expectation, gpu_devices
from gpuhost.roles.proxmox_host import host_expectation
from gpuhost.roles.vm_gpu import resolve_gpus

T = TypeVar("T")

BENCH_STALE = "doctor.bench-stale"
P2P_UNKNOWN = "doctor.p2p-unknown"
UNREACHABLE = "doctor.unreachable"


@dataclass(frozen=True)
class Observed:
    """A finding with what shows it: the evidence lines (a log's matching lines; else the finding's message)."""

    finding: Finding
    evidence: tuple[str, ...] = ()
    levels: str | None = None  # the concurrency levels its fix command measures (a tune of the admission bound)


@dataclass
class Scope:
    inventory: Inventory
    limit: str | None = None
    ctids: tuple[int, ...] = ()
    probe: bool = False
    bench_dir: Path = Path("gpuhost-bench")
    trips: int = 0  # round trips made (the doctor's own count, for the report)
    observed: list[Observed] = field(default_factory=list)

    def add(self, findings: Any, evidence: tuple[str, ...] = (), levels: str | None = None) -> None:
        for f in [findings] if isinstance(findings, Finding) else findings:
            if f is not None:
                self.observed.append(Observed(f, evidence, levels))


def _result(key: str, out: ProbeOutput | None) -> CommandResult:
    if out is None:
        return CommandResult(key, 127, "", "")
    return CommandResult(key, out.status, out.output, out.output if out.status else "")


def read_batched(conn: Connection, reads: Mapping[str, tuple[Fact[Any], tuple[Any, ...]]]) -> dict[str, Any]:
    """Several facts in one round trip: each fact's own command is a section, each section read by its own parser."""
    text = conn.run(sections_command({k: f.command(*a) for k, (f, a) in reads.items()}), check=False).stdout
    s = parse_sections(text)
    return {k: f.parse(_result(k, s.get(k)), *a) for k, (f, a) in reads.items()}


@check(
    UNREACHABLE,
    group="doctor",
    title="A node of the inventory could not be read",
    meaning="The doctor could not open a connection to the node (or a read there failed): nothing on it was judged.",
    fix="Check the node's address and SSH access in the inventory (`gpuhost shell NODE`), then run doctor again.",
)
def unreachable(subject: str, why: str) -> Finding:
    return Finding(Level.FAIL, UNREACHABLE, subject, f"not read: {why}", fix="gpuhost shell " + subject.split("/")[0])


@check(
    BENCH_STALE,
    group="doctor",
    title="The last benchmark run is older than the server's current start",
    meaning="The server was relaunched (or relaunched with another profile) after the last `gpuhost bench sglang` "
    "run: that run's findings describe the previous start, not the server as it runs now.",
    fix="Run `gpuhost bench sglang -i INV --ctid N --concurrency …` again to judge the current start.",
)
def bench_stale(subject: str, run: str, why: str) -> Finding:
    return Finding(
        Level.INFO,
        BENCH_STALE,
        subject,
        f"the last bench run ({run}) {why}: its findings are left out",
        fix="gpuhost bench sglang again to judge the current start",
    )


@check(
    P2P_UNKNOWN,
    group="doctor",
    title="No P2P verdict for a node with several GPUs",
    meaning="gpuhost keeps no P2P verdict of its own between runs: without `--probe` the doctor judges P2P only from "
    "the VM configuration (pcie=1, cliques) and the server's log, not by measuring.",
    fix="Run `gpuhost doctor --probe` (or `gpuhost verify p2p --host NODE`) to measure every GPU pair.",
)
def p2p_unknown(subject: str, gpus: int) -> Finding:
    return Finding(
        Level.INFO,
        P2P_UNKNOWN,
        subject,
        f"{gpus} GPUs, P2P not measured (run with --probe)",
        fix="gpuhost doctor --probe",
    )


def _host_reads(spec: NodeSpec, ctids: list[int], vmids: list[int]) -> dict[str, tuple[Fact[Any], tuple[Any, ...]]]:
    reads: dict[str, tuple[Fact[Any], tuple[Any, ...]]] = {}
    for ctid in ctids:
        reads[f"ct{ctid}.status"] = (ct_status, (ctid,))
        reads[f"ct{ctid}.config"] = (ct_config, (ctid,))
    for vmid in vmids:
        reads[f"vm{vmid}.status"] = (vm_status, (vmid,))
        reads[f"vm{vmid}.config"] = (vm_config, (vmid,))
    return reads


def _status_command(fact: Fact[Any]) -> Callable[..., str]:
    # pct/qm print "does not exist" on stderr, which a section discards: the status readers read it on stdout
    return lambda *a: fact.command(*a) + " 2>&1"


_CT_STATUS = Fact(ct_status.name, _status_command(ct_status), ct_status.parse)
_VM_STATUS = Fact(vm_status.name, _status_command(vm_status), vm_status.parse)


def gather_node(scope: Scope, name: str, conn: Connection, path: str) -> None:
    """Every finding of one node, its containers, VMs and servers."""
    inv = scope.inventory
    spec = inv.nodes[name]
    plan = lxc_vars(inv, name, list(scope.ctids) or None) if spec.containers else None
    cts = sorted(plan.selected()) if plan is not None else []
    vmids = sorted(v for v in spec.vms if not scope.ctids)
    reads = _host_reads(spec, cts, vmids)
    reads = {k: (_CT_STATUS if k.endswith(".status") and k.startswith("ct") else f, a) for k, (f, a) in reads.items()}
    reads = {k: (_VM_STATUS if k.endswith(".status") and k.startswith("vm") else f, a) for k, (f, a) in reads.items()}
    probes = dict(HOST_PROBES) | {k: f.command(*a) for k, (f, a) in reads.items()}
    text = conn.run(sections_command(probes), check=False).stdout
    scope.trips += 1
    s = parse_sections(text)
    facts = host_facts_from(s)
    values = {k: f.parse(_result(k, s.get(k)), *a) for k, (f, a) in reads.items()}
    scope.add(host_findings(facts, name, host_expectation(facts.cpu_vendor, host_vars(inv, name))))
    for ctid in cts:
        _container(scope, name, conn, ctid, plan.selected()[ctid] if plan else None, facts, values, path)
    for vmid in vmids:
        _vm(scope, name, conn, vmid, facts, values)
    if len(facts.gpus) > 1 and not scope.probe and not vmids:
        scope.add(p2p_unknown(name, len(facts.gpus)))
    if scope.probe and facts.gpus:
        _p2p(scope, name, conn, cts[0] if cts else None)


def _container(
    scope: Scope,
    node: str,
    conn: Connection,
    ctid: int,
    spec: Any,
    facts: HostFacts,
    values: dict[str, Any],
    path: str,
) -> None:
    from gpuhost.connection.pct import PctConnection

    subject = f"{node}/CT {ctid}"
    status = values[f"ct{ctid}.status"]
    devices = gpu_devices(spec, facts)
    scope.add(ct_checks.running(status, subject, ctid))
    scope.add(ct_checks.devices_configured(values[f"ct{ctid}.config"], subject, ctid, devices))
    if status != "running":
        return
    inside = PctConnection(conn, ctid)
    serves = scope.inventory.nodes[node].containers[ctid].serve is not None
    probes = container_probes() | (service_probes() | {"journal": journal_command()} if serves else {})
    text = inside.run(sections_command(probes), check=False).stdout
    scope.trips += 1
    s = parse_sections(text)
    module = facts.nvidia.version if facts.nvidia else None
    cfacts = parse_container_facts(CommandResult("container facts", 0, text, ""))
    scope.add(container_findings(cfacts, subject, container_expectation(devices, module)))
    if serves:
        _serving(scope, node, conn, ctid, subject, text, s, path)


def _serving(
    scope: Scope,
    node: str,
    conn: Connection,
    ctid: int,
    subject: str,
    text: str,
    s: Mapping[str, ProbeOutput],
    path: str,
) -> None:
    from gpuhost.serve.logscan import scan_text

    service = parse_service(CommandResult("service", 0, text, ""))
    if not service.launched:
        return  # never launched by gpuhost: nothing of the serving side to judge
    scope.add(check_unit(service.active, subject))
    journal = s["journal"].output if "journal" in s else ""
    lines = serve_layout.lines_of_start(journal, service.token) if service.token else None
    start = lines if lines is not None else journal.splitlines()
    scanner = scan_text("\n".join(start), subject=subject)
    for hit in scanner.report():
        scope.add(hit.finding, tuple(f"{n:>6} | {t}" for n, t in hit.lines))
    if service.active == "active":
        from gpuhost.serve.service import probe_on

        data, launched = probe_on(conn, ctid, "info")
        scope.trips += 1
        scope.add(check_health(data, subject))
        expect = launched.get("expect")
        scope.add(check_server_info(data, expect if isinstance(expect, dict) else {}, subject))
        info = data.get("server_info")
        bound = running_bound(info) if isinstance(info, dict) else None
        batches = batch_lines(start)
        full = waiting_at_bound(batches, bound) if bound is not None else []
        evidence = tuple(f"{b.number:>6} | {b.text}" for b in full[:1])
        levels = tune_levels(batches, bound) if bound is not None and full else None
        scope.add(check_admission_queueing(bound, batches, subject), evidence, levels)
    _bench(scope, node, ctid, subject, service.launched)


def last_bench(bench_dir: Path, node: str, ctid: int) -> Path | None:
    """The newest run directory's ``result.json`` of this server (run directories are named by their start)."""
    runs = sorted(bench_dir.glob(f"*-{node}-ct{ctid}/result.json")) if bench_dir.is_dir() else []
    return runs[-1] if runs else None


def bench_findings(doc: Mapping[str, Any], launched: Mapping[str, Any], subject: str, run: str) -> list[Finding]:
    """The findings a bench run recorded (its own checks'), when the run is of the server's current start."""
    got = doc.get("plan")
    plan: Mapping[str, Any] = got if isinstance(got, dict) else {}
    # both UTC ISO 8601 ("...T20:01:02+00:00" and "...T20:01:02Z"): the first 19 characters compare in time order
    created, started = str(doc.get("created") or "")[:19], str(launched.get("started_at") or "")[:19]
    if plan.get("profile") and plan.get("profile") != launched.get("profile"):
        return [
            bench_stale(subject, run, f"measured profile {plan.get('profile')}, now {launched.get('profile')} runs")
        ]
    if created and started and created < started:
        return [bench_stale(subject, run, f"is from {created}, before the current start at {started}")]
    out = []
    for f in doc.get("findings") or []:
        if isinstance(f, dict) and f.get("level") in Level.__members__ and isinstance(f.get("check"), str):
            out.append(
                Finding(
                    Level[f["level"]], f["check"], subject, str(f.get("message") or ""), f.get("cause"), f.get("fix")
                )
            )
    return out


def _bench(scope: Scope, node: str, ctid: int, subject: str, launched: Mapping[str, Any]) -> None:
    path = last_bench(scope.bench_dir, node, ctid)
    if path is None:
        return
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(doc, dict):
        scope.add(bench_findings(doc, launched, subject, path.parent.name))


def _vm(scope: Scope, node: str, conn: Connection, vmid: int, facts: HostFacts, values: dict[str, Any]) -> None:
    subject = f"{node}/VM {vmid}"
    spec = scope.inventory.nodes[node].vms[vmid]
    conf = values[f"vm{vmid}.config"]
    scope.add(vm_checks.running(values[f"vm{vmid}.status"], subject, vmid))
    if conf is None:
        return
    bdfs = tuple(g.bdf for g in facts.gpus)
    more: dict[str, tuple[Fact[Any], tuple[Any, ...]]] = {"cmd": (vm_showcmd, (vmid,))}
    if bdfs:
        more["numa"] = (pci_numa_nodes, (bdfs,))
    got = read_batched(conn, more)
    scope.trips += 1
    gpus = tuple(g.ref() for g in resolve_gpus(spec, list(bdfs), got.get("numa") or {}))
    scope.add(vm_checks.cmdline_findings(got["cmd"], dict(conf.main.options), gpus, subject))
    scope.add(vm_checks.vfio_bound(facts, gpus, subject))


def _p2p(scope: Scope, node: str, conn: Connection, ctid: int | None) -> None:
    from contextlib import nullcontext

    from gpuhost.p2p.service import P2PRequest, verify_p2p

    outcome = verify_p2p(P2PRequest(host=node, ctid=ctid, heatmap=None), lambda: nullcontext(conn))
    scope.trips += 1
    if outcome.verdict is not None:
        scope.add(
            [
                Finding(f.level, f.check, f"{node}/{f.subject}", f.message, f.cause, f.fix)
                for f in outcome.verdict.findings
            ]
        )
    elif outcome.cannot_run:
        scope.add(Finding(Level.WARN, "p2p-status", node, f"P2P could not be probed: {outcome.cannot_run}"))


def gather(scope: Scope, inventory_path: str, connect: Callable[[NodeSpec], Any]) -> list[Observed]:
    """Every node the scope selects, each read over one connection of its own."""
    from gpuhost.errors import GpuhostError

    names = scope.inventory.select(scope.limit) if scope.limit else list(scope.inventory.nodes)
    for name in names:
        try:
            with connect(scope.inventory.nodes[name]) as conn:
                gather_node(scope, name, conn, inventory_path)
        except GpuhostError as exc:
            scope.add(unreachable(name, str(exc)))
    return scope.observed
