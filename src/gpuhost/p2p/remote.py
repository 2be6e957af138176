"""Ship the probe to a target and run it with the target's python3; read its report.

It runs through :func:`gpuhost.connection.shipped_tool.run_tool`, on the connection's own
machine (local, or a node over SSH) or in an LXC on a Proxmox node (``ctid``: the zip is
pushed in with ``pct push`` and run with the container's python3). Temporary files are
removed whatever happens. The probe's JSON comes back on stdout.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuhost.connection.base import Connection
from gpuhost.connection.shipped_tool import NO_PCT, NO_PYTHON, ToolFailed, run_tool
from gpuhost.errors import ProbeError
from gpuhost.p2p.bundle import build_probe_zip
from gpuhost.p2p.report import ProbeReport, report_from_text

_HINTS = {
    NO_PYTHON: " (the probe needs only python3 and the NVIDIA driver)",
    NO_PCT: "; --ctid needs a Proxmox VE node",
}


@dataclass
class ProbeOptions:
    """What the probe measures; turned into its command-line arguments."""

    size_mib: int = 256
    reps: int = 4
    samples: int = 5
    devices: list[int] | None = None
    pairs: bool = True
    staged: bool = True
    nccl: bool = True
    deadline_s: float = 600.0
    extra: list[str] = field(default_factory=list)

    def args(self) -> list[str]:
        out = [
            "--size-mib",
            str(self.size_mib),
            "--reps",
            str(self.reps),
            "--samples",
            str(self.samples),
            "--deadline-s",
            f"{self.deadline_s:g}",
            "--nccl",
            "auto" if self.nccl else "off",
        ]
        if self.devices:
            out += ["--devices", ",".join(str(d) for d in self.devices)]
        if not self.pairs:
            out.append("--no-pairs")
        if not self.staged:
            out.append("--no-staged")
        return out + self.extra


def run_probe(conn: Connection, options: ProbeOptions, *, ctid: int | None = None) -> ProbeReport:
    """Run the probe on ``conn``'s machine (or in container ``ctid`` on it) and return its report.

    A report that says the probe cannot run (no driver, no GPU) is returned, not raised:
    it carries the facts the caller shows. :class:`ProbeError` means no report came back.
    """
    where = conn.name if ctid is None else f"{conn.name} CT {ctid}"
    try:
        out = run_tool(
            conn,
            build_probe_zip(),
            options.args(),
            name="probe.pyz",
            ctid=ctid,
            timeout=options.deadline_s + 120,
            output="text",
            ok_codes=None,
        )
    except ToolFailed as exc:
        hint = _HINTS.get(exc.exit_code_of_command, "")
        raise ProbeError(f"{where}: {exc}{hint}") from None
    result = out.result
    if not result.stdout.strip():
        tail = (result.stderr.strip() or "no output")[-1500:]
        raise ProbeError(f"{where}: the probe printed no report (exit {result.exit_code}): {tail}")
    return report_from_text(result.stdout, source=f"probe on {where}")
