"""What an operation asks the runner to do. Operations never act themselves."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WriteFile:
    """Replace a file atomically, keeping a backup of what it replaces."""

    path: str
    content: str
    mode: int | None = None
    backup: bool = True
    backup_dir: str | None = None

    def describe(self) -> str:
        return f"write {self.path}"


@dataclass(frozen=True)
class RunCommand:
    """Run a command that changes the host."""

    command: str
    ok_codes: tuple[int, ...] = (0,)
    timeout: float | None = None

    def describe(self) -> str:
        return f"run: {self.command}"


@dataclass(frozen=True)
class Reboot:
    """Reboot the host and wait until it answers again; only when the user allowed it."""

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

    def describe(self) -> str:
        shown = " ".join(f"--{k} {v}" for k, v in self.params)
        return f"PVE API {self.method.upper()} /{self.path} {shown}".rstrip()


@dataclass(frozen=True)
class InContainer:
    """An action carried out inside LXC container ``ctid`` of the host (through ``pct exec``)."""

    ctid: int
    action: WriteFile | RunCommand

    def describe(self) -> str:
        return f"CT {self.ctid}: {self.action.describe()}"


Action = WriteFile | RunCommand | Reboot | InContainer | PveCall
