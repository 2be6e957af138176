"""A VM's simulated guest: which GPUs it sees, where, and what its driver says about P2P, from the kvm
command line the VM was started with."""

from __future__ import annotations

from gpuhost.lab.gpu import topology
from gpuhost.lab.gpu.catalog import DEFAULT_MODEL, model
from gpuhost.lab.guest_boot import guest_gpus, parse_request, request_line
from gpuhost.lab.guest_seed import guest_address, vm_config, with_guests
from gpuhost.lab.node import kvm_cmdline
from gpuhost.lab.node.nvidia.gpus import Gpu
from gpuhost.lab.node.nvidia.topo import p2p
from gpuhost.lab.spec import NodeSpec

HOST: list[dict[str, object]] = topology.plan("pve1", "intel", 4, model(DEFAULT_MODEL), 2)["gpus"]  # type: ignore[assignment]


def argv(conf: dict[str, str], monkeypatch) -> list[str]:
    monkeypatch.setattr(kvm_cmdline.pci, "functions", lambda pci_id: [f"{pci_id}.0"])
    monkeypatch.setattr(kvm_cmdline.pci, "full_id", lambda pci_id: pci_id)
    return kvm_cmdline.build(110, conf)


def matrix(gpus: list[dict[str, object]]) -> list[list[str]]:
    text = p2p([Gpu.from_dict(g) for g in gpus], "r").split("\nLegend")[0]
    return [line.split()[1:] for line in text.splitlines()[1:]]


def fixed(clique_of=lambda i: 0, **extra: str) -> dict[str, str]:
    conf = {"machine": "q35", "cpu": "host"}
    conf.update({f"hostpci{i}": f"{g['bdf']},pcie=1" for i, g in enumerate(HOST)})
    conf["args"] = " ".join(f"-set device.hostpci{i}.x-nv-gpudirect-clique={clique_of(i)}" for i in range(4))
    conf.update(extra)
    return conf


def test_the_seeds_vm_sees_its_gpus_on_legacy_slots_and_no_p2p(monkeypatch):
    conf = {f"hostpci{i}": str(g["bdf"])[:-2] for i, g in enumerate(HOST)}  # bare ids, i440fx
    gpus = guest_gpus(HOST, argv(conf, monkeypatch))
    assert [g["bdf"] for g in gpus] == ["0000:00:10.0", "0000:00:11.0", "0000:00:1b.0", "0000:00:1c.0"]
    assert [g["host_bdf"] for g in gpus] == [g["bdf"] for g in HOST]
    assert all(cell in ("X", "CNS") for row in matrix(gpus) for cell in row)


def test_q35_pcie_and_one_clique_is_ok_everywhere(monkeypatch):
    gpus = guest_gpus(HOST, argv(fixed(), monkeypatch))
    assert [g["bdf"] for g in gpus] == ["0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:04:00.0"]
    assert all(cell in ("X", "OK") for row in matrix(gpus) for cell in row)


def test_cliques_per_numa_node_split_the_matrix(monkeypatch):
    rows = matrix(guest_gpus(HOST, argv(fixed(lambda i: i // 2), monkeypatch)))
    assert rows[0] == ["X", "OK", "CNS", "CNS"] and rows[3] == ["CNS", "CNS", "OK", "X"]


def test_without_clique_or_with_kvm_off_the_chipset_is_not_supported(monkeypatch):
    no_clique = fixed()
    del no_clique["args"]
    for conf in (no_clique, fixed(cpu="host,hidden=1"), fixed(machine="pc")):
        rows = matrix(guest_gpus(HOST, argv(conf, monkeypatch)))
        assert all(cell in ("X", "CNS") for row in rows for cell in row), conf


def test_a_multifunction_id_does_not_take_the_clique(monkeypatch):
    conf = fixed()
    monkeypatch.setattr(kvm_cmdline.pci, "functions", lambda pci_id: [f"{pci_id}.0", f"{pci_id}.1"])
    monkeypatch.setattr(kvm_cmdline.pci, "full_id", lambda pci_id: pci_id)
    conf["hostpci0"] = "0000:03:00,pcie=1"  # every function: ids hostpci0.0 and hostpci0.1
    gpus = guest_gpus(HOST, kvm_cmdline.build(110, conf))
    assert gpus[0]["vm_clique"] is None and gpus[1]["vm_clique"] == 0
    assert matrix(gpus)[0] == ["X", "CNS", "CNS", "CNS"]


def test_requests_round_trip():
    assert parse_request(
        request_line("vm-start", 110, ["/usr/bin/kvm", "-name", "a b"]).strip().split(" ", 1)[1:][0].split(" ", 1)
    ) == (110, ["/usr/bin/kvm", "-name", "a b"])


def test_seeded_vm_and_its_guest():
    node = NodeSpec("pve1", "127.91.3.1", gpus=2, gpu_vm=110)
    text = vm_config(node, 110, ["0000:03:00.0", "0000:04:00.0"], "BC:24:11:00:00:01")
    assert "hostpci0: 0000:03:00\n" in text and "machine" not in text and "pcie" not in text
    nodes = with_guests([node])
    assert [(n.name, n.address, n.guest_of, n.vmid) for n in nodes[1:]] == [("pve1-vm110", "127.91.3.101", "pve1", 110)]
    assert guest_address(node) == "127.91.3.101"
