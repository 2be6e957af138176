"""Readers for captured outputs: ``gpuhost verify p2p --from-file FILE``.

Recognised by content: the probe's JSON (or ``gpuhost verify p2p --json`` output),
``p2pBandwidthLatencyTest``, ``nvbandwidth`` (plain text), nccl-tests, ``nvidia-smi topo -m``
and ``nvidia-smi topo -p2p``.
"""

from __future__ import annotations

import json
from pathlib import Path

from gpuhost.errors import ProbeError
from gpuhost.p2p.evidence import Evidence
from gpuhost.p2p.from_probe import evidence_from_report
from gpuhost.p2p.merge import merge
from gpuhost.p2p.parsers import cuda_samples, nccl_tests, nvbandwidth, topo_matrix, topo_p2p
from gpuhost.p2p.report import ProbeReport, parse_report


def _probe_report(data: dict[str, object], source: str) -> ProbeReport | None:
    if data.get("tool") == "gpuhost-probe":
        return parse_report(data, source=source)
    inner = data.get("report")
    if isinstance(inner, dict) and inner.get("tool") == "gpuhost-probe":
        return parse_report(inner, source=source)
    return None


def read_capture(text: str, *, source: str = "input") -> tuple[Evidence, ProbeReport | None]:
    """The evidence in ``text`` and, for the probe's JSON, the report itself."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise ProbeError(f"{source}: looks like JSON but does not parse: {exc}") from exc
        if isinstance(data, dict):
            report = _probe_report(data, source)
            if report is not None:
                return evidence_from_report(report), report
            if "nvbandwidth" in data:
                raise ProbeError(f"{source}: nvbandwidth JSON (-j) is not read yet; give its plain-text output")
        raise ProbeError(f"{source}: JSON that is neither a gpuhost probe report nor known tool output")
    if cuda_samples.looks_like(text):
        return cuda_samples.parse(text), None
    if nvbandwidth.looks_like(text):
        return nvbandwidth.parse(text), None
    if nccl_tests.looks_like(text):
        return nccl_tests.parse(text), None
    if topo_matrix.looks_like(text):
        topology = topo_matrix.parse(text)
        if topo_p2p.looks_like(text):  # one paste holding both 'topo -m' and 'topo -p2p'
            return merge(topology, topo_p2p.parse(text)), None
        return topology, None
    if topo_p2p.looks_like(text):
        return topo_p2p.parse(text), None
    raise ProbeError(
        f"{source}: not a format gpuhost reads (p2pBandwidthLatencyTest, nvbandwidth text, "
        "nccl-tests, nvidia-smi topo -m or -p2p, or a gpuhost probe report)"
    )


def read_capture_file(path: str | Path) -> tuple[Evidence, ProbeReport | None]:
    p = Path(path)
    try:
        text = p.read_text(errors="replace")
    except OSError as exc:
        raise ProbeError(f"cannot read {p}: {exc.strerror or exc}") from exc
    return read_capture(text, source=str(p))
