"""Facts about the running system."""

from __future__ import annotations

from gpuhost.core.facts import fact
from gpuhost.core.result import CommandResult


@fact("boot id", "cat /proc/sys/kernel/random/boot_id")
def boot_id(result: CommandResult) -> str:
    """Changes at every boot."""
    return result.stdout.strip()


@fact("booted command line", "cat /proc/cmdline")
def proc_cmdline(result: CommandResult) -> list[str]:
    """The tokens of the command line the running kernel booted with."""
    return result.stdout.split()
