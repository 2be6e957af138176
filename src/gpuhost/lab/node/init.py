"""PID 1 of a lab node: starts sshd and the API server (pveproxy), reaps orphans, and takes
everything down on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, "/usr/lib/gpuhost-lab/python")

LOG_DIR = "/var/log/gpuhost-lab"


def main() -> int:
    os.makedirs(LOG_DIR, exist_ok=True)
    os.environ.clear()
    os.environ.update(
        {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", "HOME": "/root"}
    )

    class Stop(Exception):
        pass

    def on_term(signum: int, frame: object) -> None:
        raise Stop()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    from gpuhost.lab.node.hardware_boot import safe_boot

    safe_boot()  # firmware and kernel: cpuinfo, EFI, IOMMU, dmesg, modules, device-node units
    from gpuhost.lab.node.state import load as load_state

    guest = bool(load_state().extra.get("guest_of"))  # a VM's guest runs no PVE API
    services = [
        ["/usr/sbin/sshd", "-D", "-E", f"{LOG_DIR}/sshd.log"],
        [
            "/usr/bin/python3",
            "-I",
            "-c",
            "import sys; sys.path.insert(0, '/usr/lib/gpuhost-lab/python'); "
            "from gpuhost.lab.node.pveproxy import main; sys.exit(main())",
        ],
    ]
    if guest:
        services = services[:1]
    started = {}
    for unit, argv in zip(("ssh.service", "pveproxy.service"), services, strict=False):
        with open(f"{LOG_DIR}/{os.path.basename(argv[0])}.out", "ab") as log:
            started[unit] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, close_fds=True).pid
    try:
        from gpuhost.lab.node import services as units

        for unit, pid in started.items():
            units.mark_running(unit, pid)
        if units.units_to_start_at_boot():
            for unit, error in units.start_enabled_units():
                print(f"{unit}: {error}", file=sys.stderr)
    except Exception as exc:  # a broken unit must not keep the node from booting
        print(f"units: {exc}", file=sys.stderr)
    from gpuhost.lab.node import services as boot_units

    boot_units.mark_boot_finished()  # `systemctl is-system-running` answers "running" from now on
    if _has_onboot_guests():
        try:
            from gpuhost.lab.node.guests_autostart import start_onboot_guests

            start_onboot_guests()
        except Exception as exc:  # a broken guest must not keep the node from booting
            print(f"onboot: {exc}", file=sys.stderr)
    try:
        while True:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                time.sleep(0.2)
    except Stop:
        pass
    os.kill(-1, signal.SIGTERM)
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        try:
            if os.waitpid(-1, os.WNOHANG) == (0, 0):
                time.sleep(0.02)
        except ChildProcessError:
            return 0
    os.kill(-1, signal.SIGKILL)
    return 0


def _has_onboot_guests() -> bool:
    import glob

    for path in glob.glob("/etc/pve/nodes/*/qemu-server/*.conf") + glob.glob("/etc/pve/nodes/*/lxc/*.conf"):
        try:
            head = open(path).read().split("\n[", 1)[0]
        except OSError:
            continue
        if "\nonboot: 1\n" in "\n" + head:
            return True
    return False


if __name__ == "__main__":
    sys.exit(main())
