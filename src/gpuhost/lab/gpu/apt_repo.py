"""An offline apt repository with the Proxmox-only packages gpuhost installs.

Real ``.deb`` files built with ``dpkg-deb --build`` (``dkms``, ``proxmox-default-headers``,
``proxmox-headers-<series>``, ``proxmox-headers-<kernel>``, ``pve-headers``, ``pve-manager``)
and a flat repository index (``Packages``, ``Release``) that nodes use through
``deb [trusted=yes] file:/srv/gpuhost-lab/apt ./``, their only apt source. The index is also
written as apt's list files, so ``apt-get install`` works without an ``apt-get update`` first,
as on a node whose lists are current.
"""

from __future__ import annotations

import email.utils
import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from gpuhost.errors import LabError
from gpuhost.lab.node import paths as node_paths
from gpuhost.lab.node.state import kernel_for

NODE_DIR = "/srv/gpuhost-lab/apt"
SOURCES_LINE = f"deb [trusted=yes] file:{NODE_DIR} ./\n"
LIST_PREFIX = NODE_DIR.replace("/", "_") + "_._"  # apt's list file names for this source
MAINTAINER = "Proxmox Support Team <support@proxmox.com>"

DKMS_SHIM = f"""#!/usr/bin/python3 -I
# dkms: Dynamic Kernel Module Support, as the gpuhost lab simulates it
import sys
sys.path.insert(0, {node_paths.PYTHONPATH!r})
from gpuhost.lab.node.cli.dkms import main
sys.exit(main(sys.argv[1:]))
"""


@dataclass
class Deb:
    name: str
    version: str
    description: str
    depends: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # path -> content
    symlinks: dict[str, str] = field(default_factory=dict)  # path -> target
    executables: set[str] = field(default_factory=set)
    arch: str = "amd64"
    section: str = "admin"


def packages_for(pve: int) -> list[Deb]:
    debs = [
        Deb(
            "dkms",
            "3.0.10-8+deb12u1",
            "Dynamic Kernel Module System (DKMS)",
            arch="all",
            section="kernel",
            files={"/usr/sbin/dkms": DKMS_SHIM, "/etc/dkms/framework.conf": "# dkms framework\n"},
            executables={"/usr/sbin/dkms"},
        )
    ]
    default_series = {8: ("6.8", "1.1.0"), 9: ("6.14", "2.0.0")}
    kernel = kernel_for(pve)
    series, meta_version = default_series[pve]
    upstream = kernel.removesuffix("-pve")
    src = f"/usr/src/linux-headers-{kernel}"
    headers = {  # one header tree, which Proxmox's and Debian's headers packages both ship here
        f"{src}/Makefile": f"# Linux {kernel} kernel headers (gpuhost lab)\nVERSION = {series}\n",
        f"{src}/.config": "CONFIG_MODULES=y\nCONFIG_VFIO=m\nCONFIG_VFIO_PCI=m\n",
        f"{src}/include/generated/utsrelease.h": f'#define UTS_RELEASE "{kernel}"\n',
    }
    debs += [
        Deb(
            f"proxmox-headers-{kernel}",
            upstream,
            f"Proxmox Kernel Headers {kernel}",
            section="devel",
            files=dict(headers),
            symlinks={f"/lib/modules/{kernel}/build": src},
        ),
        Deb(  # what a Debian guest installs for its kernel (a VM's guest in the lab runs the same kernel)
            f"linux-headers-{kernel}",
            upstream,
            f"Linux kernel headers for {kernel}",
            section="devel",
            files=dict(headers),
            symlinks={f"/lib/modules/{kernel}/build": src},
        ),
        Deb(
            f"proxmox-headers-{series}",
            upstream,
            f"Latest Proxmox Kernel Headers {series}",
            depends=[f"proxmox-headers-{kernel}"],
            section="devel",
        ),
        Deb(
            "proxmox-default-headers",
            meta_version,
            "Default Proxmox Kernel Headers",
            depends=[f"proxmox-headers-{series}"],
            arch="all",
            section="devel",
        ),
        Deb(
            "pve-headers",
            meta_version,
            "Default Proxmox Kernel Headers (transitional package)",
            depends=["proxmox-default-headers"],
            arch="all",
            section="devel",
        ),
    ]
    debs.append(
        Deb(
            "pve-manager",
            {8: "8.3.0", 9: "9.0.3"}[pve],
            "Proxmox Virtual Environment Management Tools",
            files={"/usr/share/doc/pve-manager/README.gpuhost-lab": "PVE manager (lab)\n"},
        )
    )
    return debs


def build_deb(deb: Deb, out_dir: Path) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "pkg"
        (root / "DEBIAN").mkdir(parents=True)
        for path, content in deb.files.items():
            target = root / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
            target.chmod(0o755 if path in deb.executables else 0o644)
        for path, link_target in deb.symlinks.items():
            link = root / path.lstrip("/")
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(link_target)
        size_kb = max(1, sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) // 1024)
        control = [
            f"Package: {deb.name}",
            f"Version: {deb.version}",
            f"Architecture: {deb.arch}",
            f"Maintainer: {MAINTAINER}",
            f"Installed-Size: {size_kb}",
            f"Section: {deb.section}",
            "Priority: optional",
        ]
        if deb.depends:
            control.append(f"Depends: {', '.join(deb.depends)}")
        control.append(f"Description: {deb.description}\n Built by the gpuhost lab for offline tests.")
        (root / "DEBIAN" / "control").write_text("\n".join(control) + "\n")
        for d in [root, *[p for p in root.rglob("*") if p.is_dir()]]:
            d.chmod(0o755)
        out = out_dir / f"{deb.name}_{deb.version}_{deb.arch}.deb"
        result = subprocess.run(
            ["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(out)], capture_output=True, text=True
        )
        if result.returncode != 0:
            raise LabError(f"dpkg-deb --build {deb.name} failed (exit {result.returncode}): {result.stderr.strip()}")
        return out


def _stanza(deb: Deb, path: Path) -> str:
    data = path.read_bytes()
    control = subprocess.run(["dpkg-deb", "-f", str(path)], capture_output=True, text=True, check=True).stdout
    return (
        control.rstrip("\n").replace(
            "\nDescription:",
            f"\nFilename: ./{path.name}\nSize: {len(data)}\n"
            f"MD5sum: {hashlib.md5(data).hexdigest()}\n"
            f"SHA256: {hashlib.sha256(data).hexdigest()}\nDescription:",
            1,
        )
        + "\n"
    )


def build_repository(out_dir: Path, pve: int) -> Path:
    """Build the .debs of a PVE major's repository and its flat index in ``out_dir``; returns it."""
    if shutil.which("dpkg-deb") is None:
        raise LabError("the lab's apt repository needs dpkg-deb (apt-get install dpkg)")
    out_dir.mkdir(parents=True, exist_ok=True)
    stanzas = []
    for deb in packages_for(pve):
        stanzas.append(_stanza(deb, build_deb(deb, out_dir)))
    packages = "\n".join(stanzas)
    (out_dir / "Packages").write_text(packages)
    p = packages.encode()
    release = (
        f"Origin: gpuhost-lab\nLabel: gpuhost-lab\nSuite: lab\nCodename: lab\n"
        f"Date: {email.utils.formatdate(usegmt=True)}\nArchitectures: amd64 all\n"
        "Description: Proxmox VE packages for gpuhost lab nodes (offline)\n"
        f"MD5Sum:\n {hashlib.md5(p).hexdigest()} {len(p)} Packages\n"
        f"SHA256:\n {hashlib.sha256(p).hexdigest()} {len(p)} Packages\n"
    )
    (out_dir / "Release").write_text(release)
    return out_dir


def install_into_node(repo: Path, upper: Path) -> None:
    """Copy the repository into a node, make it the only apt source, and give apt its lists."""
    target = upper / NODE_DIR.lstrip("/")
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(repo, target)
    lists = upper / "var/lib/apt/lists"
    lists.mkdir(parents=True, exist_ok=True)
    os.setxattr(lists, "trusted.overlay.opaque", b"y")
    (lists / "partial").mkdir(exist_ok=True)
    shutil.copyfile(repo / "Packages", lists / f"{LIST_PREFIX}Packages")
    shutil.copyfile(repo / "Release", lists / f"{LIST_PREFIX}Release")
    sources_d = upper / "etc/apt/sources.list.d"
    sources_d.mkdir(parents=True, exist_ok=True)
    os.setxattr(sources_d, "trusted.overlay.opaque", b"y")
    (sources_d / "gpuhost-lab.list").write_text(
        "# the gpuhost lab's offline repository (Proxmox VE packages); nothing reaches the network\n" + SOURCES_LINE
    )
    (upper / "etc/apt/sources.list").write_text("# disabled by the gpuhost lab: nodes are offline\n")
