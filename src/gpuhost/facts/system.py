"""Facts about the running system."""

from __future__ import annotations

from gpuhost.connection.base import Connection


def boot_id(conn: Connection) -> str:
    """Changes at every boot."""
    return conn.run("cat /proc/sys/kernel/random/boot_id").stdout.strip()


def proc_cmdline(conn: Connection) -> list[str]:
    """The tokens of the command line the running kernel booted with."""
    return conn.run("cat /proc/cmdline").stdout.split()
