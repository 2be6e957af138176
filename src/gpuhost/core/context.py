"""What an operation may know about the host it plans for: the :class:`HostContext` protocol.

The runner implements it (with a live connection); tests implement it with captured facts.
Operations depend on this protocol only, never on a transport or on the runner.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, TypeVar

from gpuhost.core.facts import Fact
from gpuhost.core.guest import Guest

T = TypeVar("T")


class HostContext(Protocol):
    """One host (a node or a guest) during one run."""

    @property
    def name(self) -> str:
        """The inventory name (``pve1``, ``pve1/ct200``)."""
        ...

    @property
    def vars(self) -> Mapping[str, Any]:
        """The merged variables of the play for this host."""
        ...

    @property
    def check(self) -> bool:
        """Check mode: plans are reported, never applied."""
        ...

    @property
    def reboot_pending(self) -> bool:
        """A reboot was needed earlier in this run and was not allowed (so proofs must wait)."""
        ...

    def restart_pending(self, guest: Guest) -> bool:
        """A restart of ``guest`` was needed earlier in this run and was not allowed."""
        ...

    def fact(self, fact: Fact[T], *args: Any) -> T:
        """The fact's parsed value on this host, cached until the runner next changes it."""
        ...

    def guest(self, guest: Guest) -> HostContext:
        """The context of a guest of this node: same variables, its own facts."""
        ...

    def render_template(self, name: str, extra: Mapping[str, Any] | None = None) -> str:
        """A template of ``templates/`` rendered with this host's variables (and ``extra``)."""
        ...
