"""/usr/bin/kvm in a lab node: a process that carries the VM's real command line (visible to
``ps``) and writes its pidfile like ``-daemonize`` would, then idles until stopped."""

from __future__ import annotations

import os
import signal
import sys


def main(argv: list[str]) -> int:
    pidfile = argv[argv.index("-pidfile") + 1] if "-pidfile" in argv else None
    signal.signal(signal.SIGTERM, lambda *_: _exit(pidfile))
    if pidfile:
        os.makedirs(os.path.dirname(pidfile), exist_ok=True)
        tmp = f"{pidfile}.tmp"
        with open(tmp, "w") as fh:
            fh.write(f"{os.getpid()}\n")
        os.replace(tmp, pidfile)
    while True:
        signal.pause()


def _exit(pidfile: str | None) -> None:
    if pidfile:
        try:
            os.unlink(pidfile)
        except OSError:
            pass
    sys.exit(0)
