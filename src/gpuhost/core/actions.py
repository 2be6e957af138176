"""What an operation asks the runner to do. Operations never act themselves."""

from __future__ import annotations

from dataclasses import dataclass

from gpuhost.core.guest import Guest
from gpuhost.core.progress import CommandProgress


@dataclass(frozen=True)
class WriteFile:
    """Replace a file atomically, keeping a backup of what it replaces."""

    path: str
    content: str
    mode: int | None = None
    backup: bool = True
    backup_dir: str | None = None
    secret: bool = False  # shown as "content changed (secret)", never as a diff

    def describe(self) -> str:
        return f"write {self.path}"


@dataclass(frozen=True)
class RunCommand:
    """Run a command that changes the host."""

    command: str
    ok_codes: tuple[int, ...] = (0,)
    timeout: float | None = None
    #: how the command's streamed stdout tells its progress (the runner reports it while it runs)
    progress: CommandProgress | None = None

    def describe(self) -> str:
        return f"run: {self.command}"


@dataclass(frozen=True)
class RebootHost:
    """Reboot the host and wait until it answers again; the runner does it only with the operator's consent."""

    reason: str
    timeout: float = 900.0

    def describe(self) -> str:
        return f"reboot ({self.reason})"


@dataclass(frozen=True)
class PveCall:
    """A Proxmox VE API call (token over HTTPS, or root over SSH for root-only keys); tasks are awaited."""

    method: str
    path: str
    params: tuple[tuple[str, str], ...] = ()
    wait: bool = True
    #: the config digest the plan was made from: PVE refuses the change if the config changed since
    digest: str | None = None

    def describe(self) -> str:
        shown = " ".join(f"--{k} {v}" for k, v in self.params)
        return f"PVE API {self.method.upper()} /{self.path} {shown}".rstrip()


@dataclass(frozen=True)
class EditGuestConfig:
    """Replace a guest's config file (for raw keys no API carries) the way PVE's tools change it: under
    the per-guest lock ``lock`` (flock), only if the file still has ``digest`` (SHA-1 of the text planned
    from), atomically, keeping a backup in ``backup_dir``."""

    guest: Guest
    path: str
    lock: str
    digest: str
    content: str
    backup_dir: str | None = None

    def describe(self) -> str:
        return f"write {self.path} (under {self.lock}, if unchanged since read)"


@dataclass(frozen=True)
class CopyToGuest:
    """Copy the node's file ``source`` into guest ``guest`` at ``dest``, from node to guest (never through
    the controller): atomic, renamed into place only once its SHA-256 inside the guest is ``sha256``."""

    guest: Guest
    source: str
    dest: str
    sha256: str
    mode: int | None = None

    def describe(self) -> str:
        return f"copy {self.source} into {self.guest} at {self.dest} (sha256 {self.sha256[:12]}…)"


@dataclass(frozen=True)
class RestartGuest:
    """Restart a running guest so that its configuration applies; only with the operator's consent."""

    guest: Guest
    call: PveCall

    def describe(self) -> str:
        return f"restart {self.guest}"


@dataclass(frozen=True)
class RestartService:
    """Restart a running service (a model server) so a new configuration applies: only with the operator's
    consent (``--allow-restart``), never because a variable says so."""

    unit: str
    command: str

    def describe(self) -> str:
        return f"restart {self.unit}"


@dataclass(frozen=True)
class InGuest:
    """An action carried out inside a guest of the host (an LXC container through ``pct``, a VM over SSH)."""

    guest: Guest
    action: WriteFile | RunCommand | RestartService

    def describe(self) -> str:
        return f"{self.guest}: {self.action.describe()}"


Action = (
    WriteFile
    | RunCommand
    | RebootHost
    | PveCall
    | EditGuestConfig
    | RestartGuest
    | RestartService
    | InGuest
    | CopyToGuest
)
