"""The NVIDIA ``.run`` installer's own log judged (``gpuhost doctor nvidia-installer``): its first deciding ERROR,
with the cause and the fix. Not a host check of the registry: it reads a log, not the host's facts."""

from __future__ import annotations

from gpuhost.checks.finding import Finding, Level, check
from gpuhost.facts.nvidia_installer import InstallerLog


@check(
    "installer.nvidia",
    group="installer",
    title="The NVIDIA .run installer finished without an error",
    meaning="nvidia-installer stopped with an ERROR (a module in use, a DKMS build, missing headers, nouveau, a "
    "module the kernel refused); the driver is not (fully) installed",
    fix="the fix named for the first error; the installer's log is /var/log/nvidia-installer.log",
)
def nvidia_installer(log: InstallerLog, subject: str) -> Finding:
    """The installer's own ERROR lines, the first deciding error's cause and fix."""
    if not log.errors:
        return Finding(Level.INFO, "installer.nvidia", subject, "no ERROR in the installer's output")
    version = f" {log.version}" if log.version else ""
    more = f" (and {len(log.errors) - 1} more)" if len(log.errors) > 1 else ""
    return Finding(
        Level.FAIL,
        "installer.nvidia",
        subject,
        f"nvidia-installer{version}: ERROR: {log.errors[0][:200]}{more}",
        cause=log.cause,
        fix=log.fix,
    )
