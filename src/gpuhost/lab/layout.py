"""Where a lab keeps its state on the host."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEFAULT_STATE_DIR = Path("/run/gpuhost-lab")


def source_checkout() -> Path | None:
    """The source checkout gpuhost runs from (src layout), which nodes must not see; None when
    gpuhost is installed as a package."""
    import gpuhost

    package = Path(gpuhost.__file__).resolve().parent
    return package.parents[1] if package.parent.name == "src" else None


@dataclass(frozen=True)
class NodeLayout:
    """One node's directory: its persistent upper layer and what the supervisor hands it."""

    dir: Path

    @property
    def upper(self) -> Path:
        """The node's writable layer (persisted across node reboots)."""
        return self.dir / "upper"

    @property
    def work(self) -> Path:
        return self.dir / "work"

    @property
    def root(self) -> Path:
        """Mount point of the node's root inside its mount namespace."""
        return self.dir / "root"

    @property
    def disk(self) -> Path:
        """Storage bind-mounted into the node for container root filesystems."""
        return self.dir / "disk"

    @property
    def ctl(self) -> Path:
        """Directory bind-mounted into the node at /run/gpuhost-lab: the supervisor's socket."""
        return self.dir / "ctl"

    @property
    def cmdline_file(self) -> Path:
        """What the node's /proc/cmdline shows for the current boot."""
        return self.dir / "boot" / "cmdline"

    @property
    def console_log(self) -> Path:
        return self.dir / "console.log"


@dataclass(frozen=True)
class LabLayout:
    """The lab's state directory."""

    root: Path

    @property
    def spec_file(self) -> Path:
        return self.root / "lab.json"

    @property
    def marker_file(self) -> Path:
        """The lab's id, whether it created the state directory, and the entries it made there:
        ``lab down`` removes exactly those, and refuses a directory without this marker."""
        return self.root / ".gpuhost-lab"

    @property
    def inventory_file(self) -> Path:
        return self.root / "inventory.yml"

    @property
    def known_hosts(self) -> Path:
        return self.root / "known_hosts"

    @property
    def client_key(self) -> Path:
        return self.root / "client_key"

    @property
    def ca_cert(self) -> Path:
        return self.root / "lab-ca.pem"

    @property
    def root_password_file(self) -> Path:
        return self.root / "root.password"

    @property
    def node_library(self) -> Path:
        """Node-side code, shared read-only by every node."""
        return self.root / "node-lib"

    @property
    def boot_script(self) -> Path:
        return self.root / "boot-node.sh"

    @property
    def control_socket(self) -> Path:
        return self.root / "supervisor.sock"

    @property
    def supervisor_pid_file(self) -> Path:
        return self.root / "supervisor.pid"

    @property
    def supervisor_log(self) -> Path:
        return self.root / "supervisor.log"

    def token_file(self, node: str) -> Path:
        return self.root / f"{node}.token"

    def cluster_dir(self, name: str) -> Path:
        """The shared pmxcfs tree of a lab cluster (``nodes/``, ``ha/``), bind-mounted into each member."""
        return self.root / "clusters" / name

    def node(self, name: str) -> NodeLayout:
        return NodeLayout(self.root / "nodes" / name)
