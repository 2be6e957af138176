"""The seed hook that gives every lab node its hardware, NVIDIA installers, apt repository and
the kernel-facing commands (lspci, modprobe, modinfo, lsmod).

Assets are built once per lab, on the first node, into ``<state>/gpu`` (installers only when a
node has GPUs). The node's upper layer is written through the host's real paths (``/lib`` is
``/usr/lib`` on a merged-/usr Debian: writing ``upper/lib`` would hide the host's ``/lib``).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from gpuhost.lab.gpu import apt_repo, installers, topology
from gpuhost.lab.gpu.catalog import (
    DEFAULT_MODEL,
    DRIVER_VERSIONS,
    default_driver,
    model,
)
from gpuhost.lab.hfhub import seed as hfhub_seed
from gpuhost.lab.layout import LabLayout
from gpuhost.lab.node import paths as node_paths
from gpuhost.lab.node.nvidia import kernel
from gpuhost.lab.node.state import NodeState
from gpuhost.lab.pypi import seed as pypi_seed
from gpuhost.lab.spec import LabSpec

#: command -> (path in the node, module under gpuhost.lab.node.cli, function)
KERNEL_SHIMS: dict[str, tuple[str, str, str]] = {
    "lspci": ("/usr/bin/lspci", "lspci", "main"),
    "modprobe": ("/usr/sbin/modprobe", "kmod", "modprobe_main"),
    "modinfo": ("/usr/sbin/modinfo", "kmod", "modinfo_main"),
    "lsmod": ("/usr/sbin/lsmod", "kmod", "lsmod_main"),
}
#: the preload that shows a container its configured memlock limit (source: gpuhost/lab/gpu/prlimit_memlock.c)
MEMLOCK_PRELOAD = f"{node_paths.LAB_LIB}/prlimit-memlock.so"
#: modules a PVE kernel ships (name -> path under /lib/modules/<kernel>/kernel)
STOCK_MODULES = {
    "vfio": "drivers/vfio/vfio.ko",
    "vfio_pci": "drivers/vfio/pci/vfio-pci.ko",
    "vfio_pci_core": "drivers/vfio/pci/vfio-pci-core.ko",
    "vfio_iommu_type1": "drivers/vfio/vfio_iommu_type1.ko",
    "nouveau": "drivers/gpu/drm/nouveau/nouveau.ko",
    "nvidiafb": "drivers/video/fbdev/nvidia/nvidiafb.ko",
    "kvm": "arch/x86/kvm/kvm.ko",
    "kvm_amd": "arch/x86/kvm/kvm-amd.ko",
    "kvm_intel": "arch/x86/kvm/kvm-intel.ko",
    "zfs": "zfs/zfs.ko",
    "overlay": "fs/overlay/overlay.ko",
    "bonding": "drivers/net/bonding/bonding.ko",
}


def host_path(upper: Path, path: str) -> Path:
    """Where ``path`` of a node lives in its upper layer, following the lower layer's directory
    symlinks (``/lib`` -> ``/usr/lib``) so the upper never shadows them."""
    parts = Path(path).parts[1:]
    resolved = Path("/")
    for i, part in enumerate(parts):
        candidate = resolved / part
        if i < len(parts) - 1 and candidate.is_symlink():
            candidate = Path(os.path.realpath(candidate))
        resolved = candidate
    return upper / str(resolved).lstrip("/")


def _write(upper: Path, path: str, content: str, mode: int = 0o644) -> None:
    target = host_path(upper, path)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink() or target.is_char_device():
        target.unlink()
    target.write_text(content)
    os.chmod(target, mode)


def shim_text(command: str, module: str, func: str) -> str:
    return (
        "#!/usr/bin/python3 -I\n"
        f"# {command}: simulated by the gpuhost lab (the node's kernel is simulated too)\n"
        "import sys\n"
        f"sys.path.insert(0, {node_paths.PYTHONPATH!r})\n"
        f"from gpuhost.lab.node.cli.{module} import {func}\n"
        f"sys.exit({func}(sys.argv[1:]))\n"
    )


@dataclass
class GpuAssets:
    """What a lab builds once and every node gets."""

    layout: LabLayout
    spec: LabSpec
    installers: dict[str, installers.Installer] = field(default_factory=dict)
    repos: dict[int, Path] = field(default_factory=dict)
    memlock_preload: Path | None = None

    @property
    def dir(self) -> Path:
        return self.layout.root / "gpu"

    def drivers_file(self) -> Path:
        return self.dir / "drivers.json"

    def ensure(self) -> None:
        if self.repos:
            return
        for pve in sorted({n.pve for n in self.spec.nodes}):
            self.repos[pve] = apt_repo.build_repository(self.dir / f"apt-pve{pve}", pve)
        self.memlock_preload = self.dir / "prlimit-memlock.so"
        installers.compile_memlock_preload(self.memlock_preload)
        if any(n.gpus for n in self.spec.nodes):
            self.installers = installers.build_installers(DRIVER_VERSIONS, self.dir / "nvidia")
            self.drivers_file().write_text(
                json.dumps(
                    {
                        "default": default_driver(),
                        "drivers": {v: {"url": i.url, "sha256": i.sha256} for v, i in self.installers.items()},
                    },
                    indent=2,
                )
                + "\n"
            )

    def hook(self, upper: Path, state: NodeState) -> None:
        self.ensure()
        node = self.spec.node(state.name)
        gpu_model = model(node.gpu_model or DEFAULT_MODEL)
        state.extra["gpu"] = topology.plan(node.name, node.cpu, node.gpus, gpu_model, node.numa)
        (upper / node_paths.NODE_STATE.lstrip("/")).write_text(state.to_json())
        from gpuhost.lab.guest_seed import seed_gpu_vm

        seed_gpu_vm(upper, state, node)
        apt_repo.install_into_node(self.repos[node.pve], upper)
        if self.memlock_preload is not None:
            target = host_path(upper, MEMLOCK_PRELOAD)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.memlock_preload, target)
        for command, (path, module, func) in KERNEL_SHIMS.items():
            _write(upper, path, shim_text(command, module, func), mode=0o755)
        for name, rel in STOCK_MODULES.items():
            _write(
                upper,
                f"/lib/modules/{state.kernel}/kernel/{rel}",
                kernel.render_module_file(name, state.kernel, state.kernel, flavour="in-tree", license="GPL"),
            )
        if node.gpus:
            target = host_path(upper, installers.NODE_DIR)
            target.mkdir(parents=True, exist_ok=True)
            for inst in self.installers.values():
                shutil.copyfile(inst.path, target / inst.file_name)
                os.chmod(target / inst.file_name, 0o644)
            pypi_seed.install(self.layout.root, upper, host_path, node.address)  # package index, model
            hfhub_seed.install(upper, host_path, node.address)  # the Hub stand-in serving that model
