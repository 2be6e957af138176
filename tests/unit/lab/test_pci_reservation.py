"""The lab's ``qm start`` reserves the VM's PCI devices as qemu-server's ``reserve_pci_usage`` does
(PVE/QemuServer/PCI.pm): a device a running VM holds is refused to another VM with PVE's own message; a
reservation whose VM is gone is taken. (The lab test of the whole start: tests/integration/provision/
test_gpu_holders.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhost.lab.node import qemu
from gpuhost.lab.node.errors import PveError


@pytest.fixture
def reservations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "run" / "pci-id-reservations"
    monkeypatch.setattr(qemu, "PCI_RESERVATIONS", str(path))
    monkeypatch.setattr(qemu, "running_pid", lambda vmid: {110: 4242}.get(vmid))  # only VM 110 runs, as pid 4242
    return path


def test_a_device_a_running_vm_holds_is_refused_to_another(reservations: Path) -> None:
    qemu._reserve_pci(["0000:03:00.0"], 110, 4242)
    assert reservations.read_text() == "0000:03:00.0 110 pid:4242\n"  # PCI.pm's "$pci_id $vmid pid:$pid"
    with pytest.raises(PveError, match=r"^PCI device '0000:03:00.0' already in use by VMID '110'$"):
        qemu._reserve_pci(["0000:04:00.0", "0000:03:00.0"], 111)
    qemu._reserve_pci(["0000:03:00.0"], 110)  # the same VM again (a restart)


def test_a_leftover_reservation_is_taken(reservations: Path) -> None:
    reservations.parent.mkdir(parents=True)
    reservations.write_text("0000:03:00.0 109 pid:999\n")  # VM 109 no longer runs
    qemu._reserve_pci(["0000:03:00.0"], 111, 5151)
    assert reservations.read_text() == "0000:03:00.0 111 pid:5151\n"
