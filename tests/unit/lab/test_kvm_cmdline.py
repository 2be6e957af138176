"""qm showcmd rendering against qemu-server's cfg2cmd conventions."""

from __future__ import annotations

import pytest

from gpuhost.lab.node import kvm_cmdline
from gpuhost.lab.node.errors import PveError


def test_quoting_follows_string_shellquote() -> None:
    assert kvm_cmdline.shell_quote("kvm64,enforce,+kvm_pv_eoi") == "kvm64,enforce,+kvm_pv_eoi"
    assert kvm_cmdline.shell_quote("vm8006,debug-threads=on") == "'vm8006,debug-threads=on'"
    assert kvm_cmdline.shell_quote("/usr/share/qemu-server/pve-q35-4.0.cfg") == "/usr/share/qemu-server/pve-q35-4.0.cfg"
    assert kvm_cmdline.shell_quote("it's") == "'it'\\''s'"


def test_pretty_puts_each_option_with_its_value_on_a_line() -> None:
    out = kvm_cmdline.render(["/usr/bin/kvm", "-id", "8006", "-no-shutdown", "-m", "512"], pretty=True)
    assert out == "/usr/bin/kvm \\\n  -id 8006 \\\n  -no-shutdown \\\n  -m 512"


def test_machine_types() -> None:
    assert kvm_cmdline.machine_type({}) == ("pc+pve0", False)
    assert kvm_cmdline.machine_type({"machine": "q35"}) == ("q35+pve0", True)
    assert kvm_cmdline.machine_type({"machine": "pc-q35-8.1"}) == ("pc-q35-8.1+pve0", True)
    assert kvm_cmdline.machine_type({"machine": "type=q35,viommu=virtio"}) == ("q35+pve0", True)


def test_legacy_pci_addresses_for_non_pcie_devices() -> None:
    argv = kvm_cmdline.build(100, {"hostpci0": "0000:01:00.0", "hostpci2": "0000:02:00.0"})
    devices = [a for a in argv if a.startswith("vfio-pci")]
    assert devices == [
        "vfio-pci,host=0000:01:00.0,id=hostpci0,bus=pci.0,addr=0x10",
        "vfio-pci,host=0000:02:00.0,id=hostpci2,bus=pci.0,addr=0x1b",
    ]


def test_args_come_last_and_keep_their_words() -> None:
    argv = kvm_cmdline.build(
        100,
        {
            "machine": "q35",
            "args": "-set device.hostpci0.x-nv-gpudirect-clique=0 -set device.hostpci1.x-nv-gpudirect-clique=0",
        },
    )
    assert argv[-4:] == [
        "-set",
        "device.hostpci0.x-nv-gpudirect-clique=0",
        "-set",
        "device.hostpci1.x-nv-gpudirect-clique=0",
    ]


def test_mapping_without_node_mapping_is_an_error() -> None:
    with pytest.raises(PveError, match="resource mapping 'gpu0' not found"):
        kvm_cmdline.build(100, {"hostpci0": "mapping=gpu0,pcie=1"})
