"""The floor for the converged operator commands: a plain paramiko script doing each command's checks over one
connection, one remote command per check, as a hand-written script would.

    python commands_floor.py KEY_FILE KNOWN_HOSTS ADDRESS lxc CTID
    python commands_floor.py KEY_FILE KNOWN_HOSTS ADDRESS serve CTID HEALTH_URL
    python commands_floor.py KEY_FILE KNOWN_HOSTS ADDRESS replay COMMANDS_JSON

``lxc`` (the floor of ``provision lxc`` and ``verify lxc``): the IOMMU on the running kernel's command line, the
host driver's version, the container's config passing the GPUs, the container running, and the driver version
its ``nvidia-smi`` reports equal to the host's. ``serve`` (``launch sglang`` and ``verify serve``): the container
running, its SGLang unit active, ``/health`` 200 asked from inside it. Prints ``failed=N`` (0 when every check
holds) and exits 1 when one does not. No models, no templates, no inventory: the least a tool could do.

``replay`` (the *replay floor* of any command): the remote commands one converged run of gpuhost sent, exactly as
it sent them (a JSON list, captured by ``bench/commands.py``), run one after another over one connection, their
output read and nothing judged. It does the same remote work as that run with the least client there is, so a
command's time over it is gpuhost's own client cost: start-up, models, planning, judging.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

sys.modules["invoke"] = None  # type: ignore[assignment]  # as gpuhost imports paramiko: without invoke
sys.path.insert(0, str(Path(__file__).resolve().parent / "converge"))
from floor import command, connect  # noqa: E402  (W1's floor: the same connection, the same command)

Run = Callable[[str], tuple[int, str]]


def lxc_checks(run: Run, ctid: int) -> list[str]:
    failed = []
    _, cmdline = run("cat /proc/cmdline")
    if not any(w in cmdline.split() for w in ("iommu=pt", "intel_iommu=on", "amd_iommu=on")):
        failed.append("iommu")
    _, proc = run("cat /proc/driver/nvidia/version")  # "NVRM version: NVIDIA UNIX ... Kernel Module  580.95.05  ..."
    found = re.search(r"Kernel Module(?: for \S+)?\s+(\d[\d.]*)", proc)
    host_driver = found.group(1) if found else ""
    _, conf = run(f"cat /etc/pve/lxc/{ctid}.conf")
    if "/dev/nvidia0" not in conf:
        failed.append("config")
    _, status = run(f"pct status {ctid}")
    if status.strip() != "status: running":
        failed.append("status")
    _, guest = run(f"pct exec {ctid} -- nvidia-smi --query-gpu=driver_version --format=csv,noheader")
    if not host_driver.strip() or {v.strip() for v in guest.splitlines()} != {host_driver.strip()}:
        failed.append("driver")
    return failed


def serve_checks(run: Run, ctid: int, url: str) -> list[str]:
    failed = []
    _, status = run(f"pct status {ctid}")
    if status.strip() != "status: running":
        failed.append("status")
    _, active = run(f"pct exec {ctid} -- systemctl is-active gpuhost-sglang.service")
    if active.strip() != "active":
        failed.append("unit")
    ask = f"import urllib.request as u; print(u.urlopen({url!r}, timeout=10).status)"
    _, code = run(f"pct exec {ctid} -- python3 -c {shlex.quote(ask)}")
    if code.strip() != "200":
        failed.append("health")
    return failed


def replay(run: Run, commands_json: str) -> None:
    import json

    for cmd in json.loads(Path(commands_json).read_text()):
        run(cmd)


def main(key_file: str, known_hosts: str, address: str, kind: str, ctid: str, *rest: str) -> int:
    client = connect(address, key_file, known_hosts)
    if kind == "replay":
        try:
            replay(lambda cmd: command(client, cmd), ctid)
        finally:
            client.close()
        return 0
    try:

        def run(cmd: str) -> tuple[int, str]:
            return command(client, cmd)

        failed = lxc_checks(run, int(ctid)) if kind == "lxc" else serve_checks(run, int(ctid), rest[0])
    finally:
        client.close()
    print(f"failed={len(failed)} {' '.join(failed)}".rstrip())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
