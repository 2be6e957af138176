"""Ship the probe to a target and run it with the target's python3, in one round trip.

Three places it can run, all through a :class:`~gpuhost.connection.base.Connection`:

* the connection's own machine (local, or a node over SSH): the zip application is
  piped to a temporary directory and run there;
* an LXC on a Proxmox node (``ctid``): the zip goes to the node, ``pct push`` copies
  it into the container, ``pct exec`` runs it with the container's python3.

Temporary files are removed whatever happens. The probe's JSON comes back on stdout.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from gpuhost.connection.base import Connection
from gpuhost.errors import ProbeError
from gpuhost.p2p.bundle import build_probe_zip
from gpuhost.p2p.report import ProbeReport, report_from_text

# Exit statuses of the wrapper scripts (the probe itself uses 0, 2 and 3).
NO_TEMP_DIR = 90
NO_UPLOAD = 91
NO_PYTHON = 92
NO_PUSH = 93
NO_PCT = 94

_WRAPPER_ERRORS = {
    NO_TEMP_DIR: "cannot create a temporary directory",
    NO_UPLOAD: "cannot write the probe to the temporary directory",
    NO_PYTHON: "python3 is not installed on the target (the probe needs only python3 and the NVIDIA driver)",
    NO_PUSH: "pct push could not copy the probe into the container (is it running?)",
    NO_PCT: "pct is not available on the node: --ctid needs a Proxmox VE node",
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
        out = ["--size-mib", str(self.size_mib), "--reps", str(self.reps), "--samples", str(self.samples),
               "--deadline-s", f"{self.deadline_s:g}", "--nccl", "auto" if self.nccl else "off"]
        if self.devices:
            out += ["--devices", ",".join(str(d) for d in self.devices)]
        if not self.pairs:
            out.append("--no-pairs")
        if not self.staged:
            out.append("--no-staged")
        return out + self.extra


def host_script(probe_args: list[str]) -> str:
    """Shell script: save stdin as the probe in a temp dir, run it, clean up."""
    args = shlex.join(probe_args)
    return (
        f'd=$(mktemp -d "${{TMPDIR:-/tmp}}/gpuhost-probe.XXXXXX") || exit {NO_TEMP_DIR}\n'
        "trap 'rm -rf \"$d\"' EXIT\n"
        f'cat > "$d/probe.pyz" || exit {NO_UPLOAD}\n'
        f"command -v python3 >/dev/null 2>&1 || exit {NO_PYTHON}\n"
        f'python3 "$d/probe.pyz" {args}\n'
    )


def container_script(ctid: int, probe_args: list[str]) -> str:
    """Shell script for a Proxmox node: stdin -> node temp dir -> ``pct push`` -> ``pct exec``."""
    inside = f"/tmp/gpuhost-probe-{ctid}.pyz"
    run_inside = (f"command -v python3 >/dev/null 2>&1 || exit {NO_PYTHON}; "
                  f"python3 {inside} {shlex.join(probe_args)}; rc=$?; rm -f {inside}; exit $rc")
    return (
        f"command -v pct >/dev/null 2>&1 || exit {NO_PCT}\n"
        f'd=$(mktemp -d "${{TMPDIR:-/tmp}}/gpuhost-probe.XXXXXX") || exit {NO_TEMP_DIR}\n'
        "trap 'rm -rf \"$d\"' EXIT\n"
        f'cat > "$d/probe.pyz" || exit {NO_UPLOAD}\n'
        f'pct push {ctid} "$d/probe.pyz" {inside} || exit {NO_PUSH}\n'
        f"pct exec {ctid} -- sh -c {shlex.quote(run_inside)}\n"
    )


def run_probe(conn: Connection, options: ProbeOptions, *, ctid: int | None = None) -> ProbeReport:
    """Run the probe on ``conn``'s machine (or in container ``ctid`` on it) and return its report.

    A report that says the probe cannot run (no driver, no GPU) is returned, not raised:
    it carries the facts the caller shows. :class:`ProbeError` means no report came back.
    """
    script = host_script(options.args()) if ctid is None else container_script(ctid, options.args())
    where = conn.name if ctid is None else f"{conn.name} CT {ctid}"
    result = conn.run(["sh", "-c", script], input=build_probe_zip(), check=False,
                      timeout=options.deadline_s + 120)
    if result.exit_code in _WRAPPER_ERRORS:
        detail = result.stderr.strip()[-500:]
        raise ProbeError(f"{where}: {_WRAPPER_ERRORS[result.exit_code]}" + (f" ({detail})" if detail else ""))
    if not result.stdout.strip():
        tail = (result.stderr.strip() or "no output")[-1500:]
        raise ProbeError(f"{where}: the probe printed no report (exit {result.exit_code}): {tail}")
    return report_from_text(result.stdout, source=f"probe on {where}")
