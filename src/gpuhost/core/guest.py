"""Guests are addressed by kind and id, so a VM fits next to an LXC container."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: PVE's own words for its two guest types: ``/etc/pve/lxc`` and ``/etc/pve/qemu-server``, the API's
#: ``nodes/NODE/lxc`` and ``nodes/NODE/qemu``. The one guest kind of gpuhost (:mod:`gpuhost.pve.config` uses it).
GuestKind = Literal["lxc", "qemu"]


@dataclass(frozen=True, order=True)
class Guest:
    kind: GuestKind
    id: int

    def __str__(self) -> str:
        return f"{'CT' if self.kind == 'lxc' else 'VM'} {self.id}"

    @classmethod
    def ct(cls, ctid: int) -> Guest:
        return cls("lxc", ctid)

    @classmethod
    def vm(cls, vmid: int) -> Guest:
        return cls("qemu", vmid)
