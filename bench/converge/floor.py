"""The floor for W1: a plain paramiko script doing the same three converged checks, one connection per node.

    python floor.py [--lean] KEY_FILE KNOWN_HOSTS ADDRESS [ADDRESS ...]

For each address (port 22; several at once, one thread each, as any tool would) it reads /etc/modules,
/etc/modprobe.d/vfio.conf and the refresh guard in one command each (three round trips, as a
hand-written script would), compares them with what W1 wants, and prints ``changed=N`` (0 when
converged). No Jinja2, no models, no inventory: the least a tool could do.

``--lean`` imports paramiko the way gpuhost does, without invoke (which paramiko imports when it is
installed, as it is here beside fabric, and uses only for ``Match exec``): the floor of a machine where
paramiko is installed alone.
"""

from __future__ import annotations

import socket
import sys
import threading

if sys.argv[1:2] == ["--lean"]:
    sys.modules["invoke"] = None  # type: ignore[assignment]
    del sys.argv[1]
import paramiko  # noqa: E402

WANT_CONF = "options vfio-pci ids=10de:2335,10de:22a3 disable_vga=1\n"


def connect(address: str, key_file: str, known_hosts: str) -> paramiko.SSHClient:
    """root@address:22 with the key, the host key checked against known_hosts (strict), TCP_NODELAY."""
    sock = socket.create_connection((address, 22), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    client = paramiko.SSHClient()
    client.load_host_keys(known_hosts)
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(address, 22, "root", key_filename=key_file, look_for_keys=False, allow_agent=False, sock=sock)
    return client


def command(client: paramiko.SSHClient, cmd: str) -> tuple[int, str]:
    """One remote command (one round trip): its exit status and stdout."""
    _, out, _ = client.exec_command(cmd)
    text = out.read().decode()
    return out.channel.recv_exit_status(), text


def check(address: str, key_file: str, known_hosts: str, changes: list[int]) -> None:
    client = connect(address, key_file, known_hosts)

    def run(cmd: str) -> tuple[int, str]:
        return command(client, cmd)

    changed = 0
    _, modules = run("cat /etc/modules")
    changed += "vfio-pci" not in modules.splitlines()
    _, conf = run("cat /etc/modprobe.d/vfio.conf")
    changed += conf != WANT_CONF
    rc, _ = run("test -e /var/lib/bench-w1-refreshed")
    changed += rc != 0
    client.close()
    changes.append(changed)


def main(key_file: str, known_hosts: str, *addresses: str) -> int:
    changes: list[int] = []
    threads = [threading.Thread(target=check, args=(a, key_file, known_hosts, changes)) for a in addresses]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if len(changes) != len(addresses):
        print(f"only {len(changes)} of {len(addresses)} nodes answered", file=sys.stderr)
        return 1
    print(f"changed={sum(changes)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
