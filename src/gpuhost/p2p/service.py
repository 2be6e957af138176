"""``gpuhost verify p2p`` end to end, without the terminal: evidence in, outcome out.

The CLI only picks where the evidence comes from (a probe run on a target, or a
file) and prints the :class:`Outcome`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gpuhost.errors import UsageError
from gpuhost.p2p.baseline import Regression, compare
from gpuhost.p2p.diagnosis import diagnose
from gpuhost.p2p.evidence import Evidence
from gpuhost.p2p.from_probe import evidence_from_report
from gpuhost.p2p.judge import Finding, Level, Verdict, judge
from gpuhost.p2p.report import ProbeReport

JSON_SCHEMA = "gpuhost.verify-p2p/1"
EXIT_CANNOT_RUN = 2


@dataclass
class Settings:
    expect_p2p: bool = True
    link: tuple[int, int] | None = None  # (gen, width) for captures that do not say
    baseline: Evidence | None = None


@dataclass
class Outcome:
    target: str
    evidence: Evidence | None
    verdict: Verdict | None
    diagnosis: list[str] = field(default_factory=list)
    report: ProbeReport | None = None
    raw_report: dict[str, Any] | None = None
    regressions: list[Regression] = field(default_factory=list)
    cannot_run: str | None = None  # why nothing could be judged
    facts: list[str] = field(default_factory=list)  # what could still be read when it cannot run

    @property
    def exit_code(self) -> int:
        if self.cannot_run is not None or self.verdict is None:
            return EXIT_CANNOT_RUN
        return self.verdict.exit_code

    @property
    def word(self) -> str:
        if self.cannot_run is not None or self.verdict is None:
            return "CANNOT RUN"
        return self.verdict.level.word

    def to_json(self) -> dict[str, Any]:
        v = self.verdict
        ev = self.evidence
        return {
            "schema": JSON_SCHEMA,
            "target": self.target,
            "source": ev.source if ev else None,
            "verdict": self.word,
            "exit_code": self.exit_code,
            "cannot_run": self.cannot_run,
            "facts": self.facts,
            "diagnosis": self.diagnosis,
            "notes": v.notes if v else [],
            "machine": [_finding(f) for f in v.machine_findings] if v else [],
            "gpus": [_finding(f) for f in v.gpu_findings] if v else [],
            "pairs": [{"src": p.src, "dst": p.dst, "path": p.path, "p2p": p.p2p, "verdict": p.level.word,
                       "findings": [_finding(f) for f in p.findings]} for p in v.pairs] if v else [],
            "regressions": [r.to_json() for r in self.regressions],
            "report": self.raw_report,
        }


def _finding(f: Finding) -> dict[str, Any]:
    return {"level": f.level.word, "check": f.check, "subject": f.subject, "message": f.message,
            "cause": f.cause}


def judge_evidence(target: str, ev: Evidence, settings: Settings, *, report: ProbeReport | None = None,
                   raw_report: dict[str, Any] | None = None) -> Outcome:
    verdict = judge(ev, expect_p2p=settings.expect_p2p, link_override=settings.link)
    regressions: list[Regression] = []
    if settings.baseline is not None:
        regressions = compare(ev, settings.baseline)
        verdict.machine_findings.extend(r.to_finding() for r in regressions)
    if report is not None and report.status == "deadline":
        verdict.machine_findings.append(Finding(Level.FAIL, "probe", "machine",
                                                "the probe hit its deadline; figures are partial", None))
    return Outcome(target, ev, verdict, diagnose(verdict, ev), report, raw_report, regressions)


def cannot_run(target: str, report: ProbeReport, raw_report: dict[str, Any] | None) -> Outcome:
    """The probe ran but could not measure: say what is missing and what could be read."""
    reasons = []
    for issue in report.errors:
        hint = f" ({issue.hint})" if issue.hint else ""
        reasons.append(f"{issue.stage}: {issue.message}{hint}")
    facts = []
    for g in report.gpus:
        facts.append(f"NVML sees GPU{g.index}: {g.name or '?'} at {g.bus_id or '?'}"
                     + (f", PCIe Gen{g.pcie.gen_max} x{g.pcie.width_max}" if g.pcie.gen_max else ""))
    for p in report.pairs:
        if p.nvml and p.nvml.status:
            facts.append(f"NVML GPU{p.src}->GPU{p.dst}: read {p.nvml.status.get('read')}, "
                         f"write {p.nvml.status.get('write')}, topology {p.nvml.topology}")
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


def outcome_from_report(target: str, report: ProbeReport, settings: Settings,
                        raw_report: dict[str, Any] | None = None) -> Outcome:
    if report.status == "cannot_run" or not any(g.measured for g in report.gpus):
        return cannot_run(target, report, raw_report)
    return judge_evidence(target, evidence_from_report(report), settings, report=report, raw_report=raw_report)


def parse_link(text: str) -> tuple[int, int]:
    """``gen5x16`` -> (5, 16)."""
    m = re.fullmatch(r"(?i)gen([1-6])x(1|2|4|8|16|32)", text.strip())
    if not m:
        raise UsageError(f"--link expects GENxWIDTH such as gen5x16, got '{text}'")
    return int(m.group(1)), int(m.group(2))
