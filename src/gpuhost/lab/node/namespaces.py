"""The unshare(1) prefix that starts a simulated node's or container's init in namespaces of its own."""

from __future__ import annotations


def unshare_init(*, ipc: bool) -> list[str]:
    """``unshare`` with new mount, UTS (and, for a container, IPC) and PID namespaces, running ``/bin/sh``.

    The shell is PID 1 of its namespace (``--fork``), dies with unshare (``--kill-child``), and what it mounts
    stays inside (``--propagation private``), as LXC's own start does for a container (lxc ``start.c``
    ``lxc_spawn``: CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWPID)."""
    flags = ["-m", "-u", "-i", "-p"] if ipc else ["-m", "-u", "-p"]
    return ["unshare", *flags, "--fork", "--kill-child=SIGKILL", "--propagation", "private", "/bin/sh"]
