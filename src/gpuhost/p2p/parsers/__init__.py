"""Readers for captured outputs: ``gpuhost verify p2p --from-file FILE``.

Recognised by content: the probe's JSON (or ``gpuhost verify p2p --json`` output),
``p2pBandwidthLatencyTest``, ``nvbandwidth`` (plain text), nccl-tests, ``nvidia-smi topo -m``,
``nvidia-smi topo -p2p`` and ``nvidia-smi -q``.
"""

from __future__ import annotations

import json
from pathlib import Path

from gpuhost.errors import ProbeError
from gpuhost.p2p.evidence import Evidence
from gpuhost.p2p.from_probe import evidence_from_report
from gpuhost.p2p.merge import merge
from gpuhost.p2p.parsers import cuda_samples, nccl_tests, nvbandwidth, nvidia_smi_q, topo_matrix, topo_p2p
from gpuhost.p2p.parsers.common import MAX_CAPTURE_BYTES, MAX_GPUS
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
    try:
        found = _read_text_capture(text)
    except ValueError as exc:  # a number or index the format promises did not convert
        raise ProbeError(f"{source}: {_format_of(text)} output that does not parse: {exc}") from exc
    except ProbeError as exc:
        raise ProbeError(f"{source}: {exc}") from None
    if found is not None:
        if len(found.gpus) > MAX_GPUS:
            raise ProbeError(
                f"{source}: {_format_of(text)} output with {len(found.gpus)} GPUs, more than one machine has (the "
                f"NVIDIA driver's NV_MAX_DEVICES is {MAX_GPUS}): not a capture of one machine"
            )
        return found, None
    raise ProbeError(
        f"{source}: not a format gpuhost reads (p2pBandwidthLatencyTest, nvbandwidth text, "
        "nccl-tests, nvidia-smi topo -m or -p2p, nvidia-smi -q, or a gpuhost probe report)"
    )


def read_capture_file(path: str | Path) -> tuple[Evidence, ProbeReport | None]:
    p = Path(path)
    try:
        with p.open("rb") as fh:
            data = fh.read(MAX_CAPTURE_BYTES + 1)
    except OSError as exc:
        raise ProbeError(f"cannot read {p}: {exc.strerror or exc}") from exc
    if len(data) > MAX_CAPTURE_BYTES:
        raise ProbeError(
            f"{p}: larger than {MAX_CAPTURE_BYTES >> 20} MiB, more than any capture of one machine (an 8-GPU "
            "nvidia-smi -q is ~0.3 MB): give the tool's output alone"
        )
    return read_capture(data.decode("utf-8", errors="replace"), source=str(p))


def _read_text_capture(text: str) -> Evidence | None:
    """The evidence of a plain-text capture, by its format; None when it is none gpuhost reads."""
    if cuda_samples.looks_like(text):
        return cuda_samples.parse(text)
    if nvbandwidth.looks_like(text):
        return nvbandwidth.parse(text)
    if nccl_tests.looks_like(text):
        return nccl_tests.parse(text)
    if topo_matrix.looks_like(text):
        topology = topo_matrix.parse(text)
        if topo_p2p.looks_like(text):  # one paste holding both 'topo -m' and 'topo -p2p'
            return merge(topology, topo_p2p.parse(text))
        return topology
    if topo_p2p.looks_like(text):
        return topo_p2p.parse(text)
    if nvidia_smi_q.looks_like(text):
        return nvidia_smi_q.parse(text)
    return None


def _format_of(text: str) -> str:
    for module, name in (
        (cuda_samples, "p2pBandwidthLatencyTest"),
        (nvbandwidth, "nvbandwidth"),
        (nccl_tests, "nccl-tests"),
        (topo_matrix, "nvidia-smi topo -m"),
        (topo_p2p, "nvidia-smi topo -p2p"),
        (nvidia_smi_q, "nvidia-smi -q"),
    ):
        if module.looks_like(text):
            return name
    return "capture"
