"""The floor for W1: a plain paramiko script doing the same three converged checks on one connection.

    python floor.py ADDRESS PORT KEY_FILE KNOWN_HOSTS

Reads /etc/modules, /etc/modprobe.d/vfio.conf and the refresh guard in one command each (three
round trips, as a hand-written script would), compares them with what W1 wants, and prints
``changed=N`` (0 when converged). No Jinja2, no models, no inventory: the least a tool could do.
"""

from __future__ import annotations

import socket
import sys

import paramiko

WANT_CONF = "options vfio-pci ids=10de:2335,10de:22a3 disable_vga=1\n"


def main(address: str, port: str, key_file: str, known_hosts: str) -> int:
    sock = socket.create_connection((address, int(port)), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    client = paramiko.SSHClient()
    client.load_host_keys(known_hosts)
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(address, int(port), "root", key_filename=key_file, look_for_keys=False, allow_agent=False, sock=sock)

    def run(cmd: str) -> tuple[int, str]:
        _, out, _ = client.exec_command(cmd)
        text = out.read().decode()
        return out.channel.recv_exit_status(), text

    changed = 0
    _, modules = run("cat /etc/modules")
    changed += "vfio-pci" not in modules.splitlines()
    _, conf = run("cat /etc/modprobe.d/vfio.conf")
    changed += conf != WANT_CONF
    rc, _ = run("test -e /var/lib/bench-w1-refreshed")
    changed += rc != 0
    client.close()
    print(f"changed={changed}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
