"""W1 for pyinfra: a module line, a templated modprobe file, a guarded command."""

from pathlib import Path

from pyinfra import host
from pyinfra.facts.files import File
from pyinfra.operations import files, server

TEMPLATES = Path(__file__).resolve().parents[1] / "templates"

files.line(name="vfio-pci in /etc/modules", path="/etc/modules", line="vfio-pci")
files.template(
    name="vfio modprobe options",
    src=str(TEMPLATES / "vfio.conf.j2"),
    dest="/etc/modprobe.d/vfio.conf",
    mode="644",
    vfio_ids=["10de:2335", "10de:22a3"],
)
if not host.get_fact(File, path="/var/lib/bench-w1-refreshed"):
    server.shell(
        name="refresh boot entries", commands=["proxmox-boot-tool refresh && touch /var/lib/bench-w1-refreshed"]
    )
