"""What an operation asks the runner to do. Operations never act themselves."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from gpuhost.core.facts import Fact
from gpuhost.core.guest import Guest
from gpuhost.core.progress import CommandProgress

T = TypeVar("T")


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
    #: a one-line record (path, content) written in the same remote command that issues the reboot, once the
    #: checks before it (serving, quorum, HA) passed: never a record of a reboot that was not issued
    record: tuple[str, str] | None = None
    #: the boot a reboot was already asked from (by a run killed as it asked): wait for that one first
    pending_from: str | None = None

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


def seconds(value: float) -> str:
    """A duration as an operator reads it: ``45 s``, ``2.5 min``, ``1.5 h``."""
    if value < 120:
        return f"{value:.0f} s"
    if value < 7200:
        return f"{value / 60:.1f} min"
    return f"{value / 3600:.1f} h"


@dataclass(frozen=True)
class Stage:
    """Where a wait stands, as one reading shows it: its name (reported as progress when it changes), how long the
    wait may stay in it (``bound`` seconds, counted from the first reading that showed it; ``None``: only the wait's
    own timeout), and what the operator is told when it stays longer (``overrun``: what it means and the fix)."""

    name: str
    bound: float | None = None
    overrun: str = ""
    #: run when the stage is overrun (a hung server is stopped), before the failure is reported
    on_overrun: tuple[RunCommand, ...] = ()


def _no_stage(_value: Any) -> Stage:
    return Stage("waiting")


@dataclass(frozen=True)
class WaitUntil(Generic[T]):
    """Wait until a fact says so: what an operation returns instead of polling. The runner re-reads
    ``fact(*args)`` every ``poll`` seconds (never from the fact cache), ends with ``done``'s message, fails with
    ``failed``'s (confirmed by one more reading: the first line of a crash is often the generic one), with a
    stage that lasts past its bound, or after ``timeout`` seconds; ``on_failure`` runs then (a hung server is
    stopped). The predicates are pure functions of one reading, so a test can feed them captured readings.
    Check mode only says what would be waited for (:meth:`describe`); nothing is polled."""

    what: str
    fact: Fact[T]
    done: Callable[[T], str | None]
    failed: Callable[[T], str | None]
    args: tuple[Any, ...] = ()
    stage: Callable[[T], Stage] = _no_stage
    timeout: float = 600.0
    poll: float = 2.0
    #: the progress step the runner reports under (``CT 200 sglang readiness``)
    step: str = "wait"
    #: the stages a reading shows were passed, in order (a log's phases): each is reported once, also those passed
    #: between two looks
    trail: Callable[[T], tuple[str, ...]] | None = None
    #: what the last reading showed, said with a timeout (``phase: loading weights, /health no answer``)
    explain: Callable[[T], str] | None = None
    #: said after a timeout's message (where to look, who else is waited for)
    hint: str = ""
    #: run on this host when the wait fails or runs out (stop a hung server), before the failure is reported
    on_failure: tuple[RunCommand, ...] = ()
    #: a failure counts once a second reading still shows one (a crash's first line is often the generic one)
    confirm_failure: bool = True
    #: what else bounds the wait, for check mode (``first start: the SGLang cache is empty``)
    bounds: tuple[str, ...] = field(default=())

    def describe(self) -> str:
        also = f"; {'; '.join(self.bounds)}" if self.bounds else ""
        return f"wait up to {seconds(self.timeout)} (every {self.poll:g} s) until {self.what}{also}"


@dataclass(frozen=True)
class InGuest:
    """An action carried out inside a guest of the host (an LXC container through ``pct``, a VM over SSH)."""

    guest: Guest
    action: WriteFile | RunCommand | RestartService | WaitUntil[Any]

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
    | WaitUntil[Any]
)

#: what an operation planned inside a guest may ask for (the in-guest wrappers carry these into the guest)
GUEST_ACTIONS = (WriteFile, RunCommand, RestartService, WaitUntil)
