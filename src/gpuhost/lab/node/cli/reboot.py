"""reboot: ask the lab supervisor to restart this node (it comes back with the command line its
bootloader would use; the SSH connection drops like on real hardware)."""

from __future__ import annotations

import socket
import sys

from gpuhost.lab.node import paths


def main(argv: list[str]) -> int:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10)
            sock.connect(paths.SUPERVISOR_SOCKET)
            sock.sendall(b"reboot\n")
            reply = sock.recv(4096).decode().strip()
    except OSError as exc:
        print(f"Failed to talk to init daemon: {exc}", file=sys.stderr)
        return 1
    if reply != "ok":
        print(f"Failed to reboot: {reply}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
