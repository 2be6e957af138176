"""Typed view of the probe's JSON report (``schema_version`` 1).

Only the keys the controller reads are typed; other keys are kept as they came
(``extra="allow"``), so a dump of the model is the whole report. A report from another
schema version is refused with a message saying which one was expected.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpuhost.errors import ProbeError
from gpuhost.probe import SCHEMA_VERSION


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow")


class Figure(_Model):
    """The median of samples of one quantity."""

    value: float
    unit: str
    samples: list[float] = Field(default_factory=list)
    unheld_samples: int = 0
    stream_held: bool = True


class IntegrityResult(_Model):
    checked: int = 0
    failed: int = 0
    failures: list[str] = Field(default_factory=list)


class PcieLink(_Model):
    gen_current_idle: int | None = None
    gen_max: int | None = None
    gen_gpu_max: int | None = None
    width_current_idle: int | None = None
    width_max: int | None = None
    replay_counter: int | None = None
    gen_under_load: int | None = None
    width_under_load: int | None = None


class NvLinkInfo(_Model):
    active_links: int = 0
    versions: list[int] = Field(default_factory=list)
    remote_bus_ids: dict[str, int] = Field(default_factory=dict)
    remote_types: dict[str, int] = Field(default_factory=dict)
    error: str | None = None


class LocalCopies(_Model):
    h2d: Figure | None = None
    d2h: Figure | None = None
    d2d: Figure | None = None
    d2d_latency: Figure | None = None
    integrity: IntegrityResult = IntegrityResult()


class GpuReport(_Model):
    index: int
    measured: bool = False
    name: str | None = None
    bus_id: str | None = None
    uuid: str | None = None
    compute_capability: str | None = None
    memory_total_bytes: int | None = None
    bar1_total_bytes: int | None = None
    virtualization_mode: str | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    pcie: PcieLink = PcieLink()
    nvlink: NvLinkInfo = NvLinkInfo()
    local: LocalCopies | None = None
    numa_node: int | None = None  # from sysfs, like nvidia-smi topo -m's NUMA Affinity
    cpu_affinity: str | None = None  # local_cpulist, e.g. 0-55,112-167


class NvmlPair(_Model):
    status: dict[str, str | None] = Field(default_factory=dict)
    topology: str | None = None


class CudaPeer(_Model):
    can_access_peer: bool | None = None
    access_supported: int | None = None
    performance_rank: int | None = None
    native_atomics: int | None = None


class PathCopies(_Model):
    uni: Figure | None = None
    bidi: Figure | None = None
    latency: Figure | None = None
    integrity: IntegrityResult = IntegrityResult()


class PairReport(_Model):
    src: int
    dst: int
    nvml: NvmlPair | None = None
    cuda: CudaPeer | None = None
    p2p: PathCopies | None = None
    staged: PathCopies | None = None
    p2p_skipped: str | None = None


class ProbeIssue(_Model):
    stage: str
    message: str
    hint: str | None = None


class HostInfo(_Model):
    hostname: str | None = None
    kernel: str | None = None
    python: str | None = None
    cmdline: str | None = None
    cpu_hypervisor_flag: bool | None = None
    virt: str | None = None
    container: str | None = None
    device_nodes: list[str] = Field(default_factory=list)


class ProbeReport(_Model):
    schema_version: int
    probe_version: str = ""
    started_at: str = ""
    status: str
    duration_s: float | None = None
    settings: dict[str, Any] = Field(default_factory=dict)
    host: HostInfo = HostInfo()
    driver: dict[str, Any] = Field(default_factory=dict)
    errors: list[ProbeIssue] = Field(default_factory=list)
    gpus: list[GpuReport] = Field(default_factory=list)
    pairs: list[PairReport] = Field(default_factory=list)
    nvidia_smi: dict[str, Any] | None = None
    nccl: dict[str, Any] | None = None

    @property
    def measured(self) -> bool:
        return self.status == "measured"


def parse_report(data: dict[str, Any], *, source: str = "probe output") -> ProbeReport:
    """Validate a decoded report; :class:`ProbeError` says what is wrong and where."""
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ProbeError(f"{source}: probe report schema_version {version!r}, this gpuhost reads {SCHEMA_VERSION}")
    try:
        return ProbeReport.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ProbeError(f"{source}: malformed probe report at '{where}': {first['msg']}") from exc


def report_from_text(text: str, *, source: str = "probe output") -> ProbeReport:
    """The report in ``text`` (the probe's stdout: one JSON object)."""
    start = text.find("{")
    if start < 0:
        raise ProbeError(f"{source}: no JSON report in the output: {text.strip()[-500:]!r}")
    try:
        data = json.loads(text[start:])
    except json.JSONDecodeError as exc:
        raise ProbeError(f"{source}: the probe's JSON is cut or malformed ({exc})") from exc
    if not isinstance(data, dict):
        raise ProbeError(f"{source}: the probe printed JSON that is not an object")
    return parse_report(data, source=source)
