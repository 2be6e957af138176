"""The probe reads each GPU's NUMA node and nearby CPUs from sysfs, as nvidia-smi topo -m shows them."""

from pathlib import Path

from gpuhost.p2p.from_probe import evidence_from_report
from gpuhost.p2p.report import parse_report
from gpuhost.probe.nvml_facts import sysfs_placement
from tests.unit.p2p.captures import fixture


def test_numa_node_and_cpu_list_from_sysfs(tmp_path: Path) -> None:
    dev = tmp_path / "0000:34:00.0"
    dev.mkdir()
    (dev / "numa_node").write_text("1\n")
    (dev / "local_cpulist").write_text("56-111,168-223\n")
    assert sysfs_placement("00000000:34:00.0", str(tmp_path)) == {"numa_node": 1, "cpu_affinity": "56-111,168-223"}
    (dev / "numa_node").write_text("-1\n")
    assert sysfs_placement("00000000:34:00.0", str(tmp_path))["numa_node"] is None
    assert sysfs_placement(None, str(tmp_path)) == {"numa_node": None, "cpu_affinity": None}


def test_report_placement_and_nvlink_matrix_reach_the_evidence() -> None:
    import json

    data = json.loads(fixture("probe_2x-h200-vm_nvlink.json").read_text())
    data["gpus"][0].update(numa_node=0, cpu_affinity="0-31")
    ev = evidence_from_report(parse_report(data, source="test"))
    assert (ev.gpus[0].numa_node, ev.gpus[0].cpu_affinity) == ("0", "0-31")
    pair = ev.pair(0, 1)
    assert pair is not None and pair.topology == "NV18"  # NVML's NVLink peers, where NVML's ancestor says PHB
