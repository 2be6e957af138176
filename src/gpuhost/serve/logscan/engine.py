"""Incremental signature matching over SGLang log lines."""

from __future__ import annotations

import re
from collections import deque

from pydantic import BaseModel, ConfigDict

from gpuhost.checks import Finding, Level
from gpuhost.serve.logscan.dispatch import CONTEXTS, refine
from gpuhost.serve.logscan.normalize import bar_label, read_line, split_raw
from gpuhost.serve.logscan.phases import Phase, PhaseTracker
from gpuhost.serve.logscan.signatures import SIGNATURES, Signature


class Hit(BaseModel):
    """One signature seen in the log: its finding and the lines that matched (1-based line numbers)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    signature: str
    finding: Finding
    lines: list[tuple[int, str]]
    evidence: str = ""  # the message (shipper prefixes removed) of the first line that matched

    @property
    def fatal(self) -> bool:
        return self.finding.level >= Level.FAIL


class LogScanner:
    """Feed lines as they arrive; each call returns the findings first seen in that line."""

    def __init__(self, subject: str = "sglang", signatures: list[Signature] | None = None) -> None:
        self.subject = subject
        self.signatures = signatures if signatures is not None else SIGNATURES
        self.phases = PhaseTracker()
        self._hits: dict[str, Hit] = {}
        self._recent: deque[str] = deque(maxlen=max(s.window for s in self.signatures))
        self._lineno = 0
        self._partial = ""
        self._contexts: set[re.Pattern[str]] = set()

    @property
    def hits(self) -> list[Hit]:
        return list(self._hits.values())

    def report(self) -> list[Hit]:
        """Hits worth showing: the unclassified-traceback hit is dropped when a fatal signature explains it."""
        classified = any(h.fatal for h in self._hits.values())
        return [h for h in self._hits.values() if not (classified and h.signature == "python-traceback")]

    @property
    def findings(self) -> list[Finding]:
        return [h.finding for h in self._hits.values()]

    @property
    def fatal(self) -> bool:
        return any(h.fatal for h in self._hits.values())

    def feed(self, raw: str) -> list[Finding]:
        """One physical line (carriage returns inside it are split as tqdm redraws)."""
        new: list[Finding] = []
        for part in split_raw(raw.rstrip("\n")):
            new.extend(self._one(part))
        return new

    def feed_chunk(self, chunk: str) -> list[Finding]:
        """Arbitrary text as read from a pipe: complete lines are scanned, the rest waits for more."""
        text = self._partial + chunk
        *lines, self._partial = text.split("\n")
        new: list[Finding] = []
        for line in lines:
            new.extend(self.feed(line))
        return new

    def close(self) -> list[Finding]:
        """Scan a last line that had no newline (a truncated paste)."""
        rest, self._partial = self._partial, ""
        return self.feed(rest) if rest else []

    def _one(self, raw: str) -> list[Finding]:
        self._lineno += 1
        label = bar_label(raw)
        if label is not None:  # a bar is not a message, but what it names is a phase (Capturing batches)
            self.phases.feed(label)
        text = read_line(raw).text
        if not text:
            return []
        self.phases.feed(text)
        for ctx in CONTEXTS:
            if ctx not in self._contexts and ctx.search(text):
                self._contexts.add(ctx)
        new: list[Finding] = []
        for sig in self.signatures:
            if not any(p.search(text) for p in sig.patterns):
                continue
            if any(u in self._hits for u in sig.unless):
                continue
            if sig.near is not None and not any(sig.near.search(r) for r in list(self._recent)[-sig.window :]):
                continue
            hit = self._hits.get(sig.name)
            finding = self._finding(sig, text)
            if hit is not None:
                if len(hit.lines) < sig.max_lines:
                    hit.lines.append((self._lineno, raw))
                if finding.level > hit.finding.level:  # a warning first (NaN replaced), the crash later
                    hit.finding, hit.evidence = finding, text
                    new.append(finding)
                continue
            self._hits[sig.name] = Hit(signature=sig.name, finding=finding, lines=[(self._lineno, raw)], evidence=text)
            new.append(finding)
        self._recent.append(text)
        return new

    def _finding(self, sig: Signature, text: str) -> Finding:
        """The finding of ``sig`` on message ``text``: the cause and fix fitting the embedded error."""
        cause, fix, level = sig.cause, sig.fix, sig.level
        variant = refine(sig.name, text, self._contexts)
        if variant is not None:
            cause, fix = variant.cause, variant.fix
            level = variant.level if variant.level is not None else level
        if sig.name == "cuda-oom":
            during = (
                "CUDA graph capture"
                if self.phases.capture_in_progress or "graph" in text.lower()
                else ("weight loading" if self.phases.state.phase < Phase.WEIGHTS_LOADED else "")
            )
            cause = f"during {during}: {cause}" if during else cause
        return Finding(
            level=level,
            check=sig.check_name,
            subject=self.subject,
            message=f"{sig.title}: {text[:300]}",
            cause=cause,
            fix=fix,
        )


def scan_text(text: str, subject: str = "sglang") -> LogScanner:
    """Scan a whole log (a file or a paste); the returned scanner holds hits and phases."""
    scanner = LogScanner(subject)
    scanner.feed_chunk(text)
    scanner.close()
    return scanner
