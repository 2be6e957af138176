"""``gpuhost verify p2p`` end to end, without the terminal: evidence in, outcome out.

The CLI only picks where the evidence comes from (a probe run on a target, or a
file) and prints the :class:`Outcome`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuhost.errors import ProbeError, UsageError
from gpuhost.p2p.baseline import Regression, compare
from gpuhost.p2p.diagnosis import diagnose
from gpuhost.p2p.evidence import Evidence
from gpuhost.p2p.from_probe import evidence_from_report
from gpuhost.p2p.json_out import JSON_SCHEMA
from gpuhost.p2p.judge import Finding, Level, Verdict, judge
from gpuhost.p2p.merge import merge
from gpuhost.p2p.outcome import EXIT_CANNOT_RUN, Outcome
from gpuhost.p2p.report import ProbeReport

__all__ = [
    "EXIT_CANNOT_RUN",
    "JSON_SCHEMA",
    "Outcome",
    "Settings",
    "judge_evidence",
    "judge_files",
    "outcome_from_report",
    "parse_link",
]


@dataclass
class Settings:
    expect_p2p: bool = True
    link: tuple[int, int] | None = None  # (gen, width) for captures that do not say
    baseline: Evidence | None = None


def _nothing_judged(ev: Evidence, verdict: Verdict) -> str | None:
    """Why nothing could be judged (exit 2, "no measurement"), or None when something was."""
    if verdict.findings:
        return None
    if ev.pairs and all(p.topology and p.p2p is None and not p.nvml_status for p in ev.pairs):
        return (
            "no measurement: a topology shows which path each pair would take, not whether P2P works; add a "
            "bandwidth or status capture (--from-file again) or run gpuhost verify p2p on the machine"
        )
    if ev.pairs and all(p.nvml_status and not {"read", "write"} & set(p.nvml_status) for p in ev.pairs):
        caps = sorted({cap for p in ev.pairs for cap in p.nvml_status})
        return (
            f"no measurement: the status shows only {', '.join(caps)}; 'nvidia-smi topo -p2p r' and 'w' "
            "(read and write) decide whether P2P works"
        )
    if ev.partial:
        return "no measurement: " + "; ".join(ev.partial)
    if ev.measured:
        return (
            "no measurement that can be judged here: the figures need a line rate (--link GENxWIDTH) or a "
            "topology capture"
        )
    return "no measurement in the input"


def judge_evidence(
    target: str,
    ev: Evidence,
    settings: Settings,
    *,
    report: ProbeReport | None = None,
    raw_report: dict[str, Any] | None = None,
) -> Outcome:
    verdict = judge(ev, expect_p2p=settings.expect_p2p, link_override=settings.link)
    regressions: list[Regression] = []
    if settings.baseline is not None:
        regressions = compare(ev, settings.baseline)
        verdict.machine_findings.extend(r.to_finding() for r in regressions)
    if report is not None and report.status == "deadline":
        verdict.machine_findings.append(
            Finding(Level.FAIL, "probe", "machine", "the probe hit its deadline; figures are partial", None)
        )
    why = _nothing_judged(ev, verdict)
    diagnosis = [] if why else diagnose(verdict, ev)
    if diagnosis and ev.partial:
        diagnosis.append("Partial capture, judged on what is there: " + "; ".join(ev.partial))
    return Outcome(target, ev, verdict, diagnosis, report, raw_report, regressions, cannot_run=why)


def cannot_run(target: str, report: ProbeReport, raw_report: dict[str, Any] | None) -> Outcome:
    """The probe ran but could not measure: say what is missing and what could be read."""
    reasons = []
    for issue in report.errors:
        hint = f" ({issue.hint})" if issue.hint else ""
        reasons.append(f"{issue.stage}: {issue.message}{hint}")
    facts = []
    for g in report.gpus:
        facts.append(
            f"NVML sees GPU{g.index}: {g.name or '?'} at {g.bus_id or '?'}"
            + (f", PCIe Gen{g.pcie.gen_max} x{g.pcie.width_max}" if g.pcie.gen_max else "")
        )
    for p in report.pairs:
        if p.nvml and p.nvml.status:
            facts.append(
                f"NVML GPU{p.src}->GPU{p.dst}: read {p.nvml.status.get('read')}, "
                f"write {p.nvml.status.get('write')}, topology {p.nvml.topology}"
            )
    smi = report.nvidia_smi or {}
    if smi.get("available") is False:
        facts.append(f"nvidia-smi: {smi.get('error')}")
    elif smi:
        for key in ("query", "topo_p2p_r"):
            item = smi.get(key) or {}
            out = str(item.get("output") or "").strip()
            if out:
                facts.append(f"nvidia-smi {key} (exit {item.get('exit_code')}):\n{out}")
    if report.host.device_nodes == [] and report.host.kernel:
        facts.append("no /dev/nvidia* device nodes on the target")
    why = "; ".join(reasons) or f"the probe reported status '{report.status}'"
    return Outcome(target, None, None, [], report, raw_report, cannot_run=why, facts=facts)


def outcome_from_report(
    target: str, report: ProbeReport, settings: Settings, raw_report: dict[str, Any] | None = None
) -> Outcome:
    if report.status == "cannot_run" or not any(g.measured for g in report.gpus):
        return cannot_run(target, report, raw_report)
    return judge_evidence(target, evidence_from_report(report), settings, report=report, raw_report=raw_report)


def parse_link(text: str) -> tuple[int, int]:
    """``gen5x16`` -> (5, 16)."""
    m = re.fullmatch(r"(?i)gen([1-6])x(1|2|4|8|16|32)", text.strip())
    if not m:
        raise UsageError(f"--link expects GENxWIDTH such as gen5x16, got '{text}'")
    return int(m.group(1)), int(m.group(2))


def _raw_report(path: Path) -> dict[str, Any] | None:
    raw = json.loads(path.read_text())
    if isinstance(raw, dict) and "report" in raw and raw.get("schema"):
        raw = raw["report"]
    return raw if isinstance(raw, dict) else None


def judge_files(paths: Sequence[Path], settings: Settings) -> Outcome:
    """``--from-file A [--from-file B ...]``: captures of one machine, judged together."""
    from gpuhost.p2p.parsers import read_capture_file

    if not paths:
        raise UsageError("no file given")
    read = [(path, *read_capture_file(path)) for path in paths]
    target = " + ".join(str(p) for p in paths)
    reports = [(path, report) for path, _, report in read if report is not None]
    if len(reports) > 1:
        raise ProbeError("more than one probe report given: judge one machine's probe report at a time")
    if len(read) == 1 and reports:
        path, report = reports[0]
        return outcome_from_report(target, report, settings, _raw_report(path))
    if reports:
        path, report = reports[0]
        if report.status == "cannot_run" or not any(g.measured for g in report.gpus):
            return cannot_run(target, report, _raw_report(path))
    ev = merge(*(ev for _, ev, _ in read))
    first = reports[0][1] if reports else None
    raw = _raw_report(reports[0][0]) if reports else None
    return judge_evidence(target, ev, settings, report=first, raw_report=raw)


def probe_target(
    conn: Any,
    target: str,
    settings: Settings,
    *,
    options: Any,
    ctid: int | None = None,
    save_report: Path | None = None,
) -> Outcome:
    """Run the probe through ``conn`` (on the node, or in CT ``ctid``) and judge its report."""
    from gpuhost.p2p.remote import run_probe

    report = run_probe(conn, options, ctid=ctid)
    raw = report.model_dump(mode="json")
    if save_report is not None:
        save_report.write_text(json.dumps(raw, indent=1) + "\n")
    return outcome_from_report(target, report, settings, raw)


def settings_from_options(*, expect_p2p: bool, link: str | None, baseline: Path | None) -> Settings:
    """The judge's settings from the command line's options."""
    from gpuhost.p2p.parsers import read_capture_file

    settings = Settings(expect_p2p=expect_p2p, link=parse_link(link) if link else None)
    if baseline is not None:
        settings.baseline = read_capture_file(baseline)[0]
    return settings


def parse_devices(text: str) -> list[int]:
    """``--devices 0,1``: CUDA ordinals, comma-separated; anything else is a usage error naming the flag."""
    words = [w.strip() for w in text.split(",")]
    if not all(w.isdigit() for w in words):
        raise UsageError(f"--devices: '{text}' is not a comma list of CUDA ordinals such as 0,1")
    return [int(w) for w in words]


@dataclass(frozen=True)
class P2PRequest:
    """What ``gpuhost verify p2p`` was asked: captures to judge (``from_file``), or a probe to run through the
    connection it is given, on the node or in container ``ctid``."""

    from_file: Sequence[Path] = ()
    host: str | None = None
    ctid: int | None = None
    expect_p2p: bool = True
    link: str | None = None
    baseline: Path | None = None
    save_report: Path | None = None
    heatmap: Path | None = None
    size_mib: int = 256
    samples: int = 5
    devices: str | None = None
    staged: bool = True
    nccl: bool = True


def verify_p2p(req: P2PRequest, connect: Callable[[], AbstractContextManager[Any]]) -> Outcome:
    """Judge the captures, or probe through ``connect()`` and judge; the heatmap written when asked for."""
    settings = settings_from_options(expect_p2p=req.expect_p2p, link=req.link, baseline=req.baseline)
    if req.from_file:
        if req.host or req.ctid is not None:
            raise UsageError("--from-file judges files; it takes no --host or --ctid")
        outcome = judge_files(req.from_file, settings)
    else:
        from gpuhost.p2p.remote import ProbeOptions

        opts = ProbeOptions(
            size_mib=req.size_mib,
            samples=req.samples,
            staged=req.staged,
            nccl=req.nccl,
            devices=parse_devices(req.devices) if req.devices else None,
        )
        target = (req.host or "localhost") + (f" CT {req.ctid}" if req.ctid is not None else "")
        with connect() as conn:
            outcome = probe_target(conn, target, settings, options=opts, ctid=req.ctid, save_report=req.save_report)
    if req.heatmap is not None and outcome.evidence is not None:
        from gpuhost.p2p.heatmap import write_outcome_heatmap

        write_outcome_heatmap(outcome, req.heatmap)
    return outcome
