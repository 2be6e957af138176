"""What one ``verify p2p`` judged: the evidence, the verdict, the diagnosis, and why nothing could be judged."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuhost.p2p.baseline import Regression
from gpuhost.p2p.evidence import Evidence
from gpuhost.p2p.judge import Verdict
from gpuhost.p2p.report import ProbeReport

EXIT_CANNOT_RUN = 2


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
