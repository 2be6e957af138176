"""W2 for pyinfra: the host role's converged checks."""

from io import StringIO
from pathlib import Path

from pyinfra import host
from pyinfra.facts.files import File
from pyinfra.operations import files, server, systemd

TEMPLATES = Path(__file__).resolve().parents[1] / "templates"

files.line(
    name="IOMMU on the kernel command line",
    path="/etc/kernel/cmdline",
    line="^root=",
    replace="root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt",
)
files.put(
    name="NVIDIA modules load at boot", src=StringIO("nvidia\nnvidia_uvm\n"), dest="/etc/modules-load.d/nvidia.conf"
)
for unit in ("bench-a", "bench-b"):
    files.template(
        name=f"{unit} file",
        src=str(TEMPLATES / f"{unit}.service.j2"),
        dest=f"/etc/systemd/system/{unit}.service",
        mode="644",
        unit_tag="w2",
    )
    systemd.service(name=f"{unit} enabled", service=f"{unit}.service", enabled=True, running=None)
if not host.get_fact(File, path="/var/lib/bench-w2-refreshed"):
    server.shell(
        name="refresh boot entries", commands=["proxmox-boot-tool refresh && touch /var/lib/bench-w2-refreshed"]
    )
