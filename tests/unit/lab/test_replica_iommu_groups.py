"""A replica's IOMMU groups follow the host's captured /sys/kernel/iommu_groups listing, not the lab's rule
(real listings in tests/fixtures/host/iommu-groups, SOURCE.md)."""

from __future__ import annotations

from pathlib import Path

from gpuhost.lab.gpu import topology
from gpuhost.lab.gpu.catalog import DEFAULT_MODEL, model
from gpuhost.lab.node import iommu_groups
from tests.unit.lab.test_replica_real_bundles import _replica

HOST = Path(__file__).resolve().parents[2] / "fixtures" / "host"


def test_an_unsorted_find_listing_of_a_pve_host_is_read_group_by_group() -> None:
    text = (HOST / "iommu-groups" / "find-type-l-pve-gt710-unsorted.txt").read_text()
    groups = {g["group"]: g["devices"] for g in iommu_groups.from_listing(text)}
    assert sorted(groups) == list(range(14))  # groups 0-13; the prompt line is no group
    assert groups[13] == ["0000:05:00.0", "0000:05:00.1"]  # the GT 710 and its HDMI audio, listed .1 first
    assert groups[1] == ["0000:00:01.0", "0000:01:00.0"]  # the x16 root port shares its group with the NVMe
    assert groups[9] == ["0000:00:1f.0", "0000:00:1f.2", "0000:00:1f.4"]
    assert sum(len(d) for d in groups.values()) == 21  # one line per function


def test_a_gpu_the_host_put_in_no_group_has_none_on_its_replica(tmp_path: Path) -> None:
    r = _replica("gtx1080ti-threadripper-no-iommu-group", tmp_path)
    gpus = r.gpu_plan["gpus"]
    assert isinstance(gpus, list) and [(g["bdf"], g["device_id"]) for g in gpus] == [("0000:43:00.0", "1b06")]
    groups = r.gpu_plan["iommu_groups"]
    assert isinstance(groups, list)
    by_number = {g["group"]: g["devices"] for g in groups}
    assert sorted(by_number) == list(range(23))  # the poster's "22 IOMMU groups" (0-22)
    assert by_number[16] == ["0000:0a:00.0", "0000:0a:00.1"]  # the GTX 1070, with functions the lab has no device for
    assert len(by_number[14]) == 13  # the chipset group, as listed
    assert all("0000:43:00.0" not in d for d in by_number.values())  # "none of which appear to have the bus 43:00"
    assert "IOMMU groups: the host's 23 group(s), as captured (once the replica's IOMMU is on)" in r.not_reproduced
    assert "IOMMU groups: the host's listing has no group for 0000:43:00.0; neither has the replica" in r.not_reproduced


def test_a_bundle_without_a_listing_says_its_groups_are_the_labs_rule(tmp_path: Path) -> None:
    r = _replica("h100-sxm5-4gpu-grub", tmp_path)
    groups = r.gpu_plan["iommu_groups"]
    assert isinstance(groups, list)
    # lspci -nn | grep -i nvidia lists no bridges: each of the four GPUs alone in a group
    assert [g["devices"] for g in groups] == [["0000:06:00.0"], ["0000:0c:00.0"], ["0000:46:00.0"], ["0000:4c:00.0"]]
    assert any(n.startswith("IOMMU groups: the bundle lists none") for n in r.not_reproduced)


def test_a_node_from_flags_carries_its_groups_as_data() -> None:
    # --gpus 2 on one NUMA node: a pair behind one switch (root port 00:01.1, switch 01:00.0, ports 02:00.0, 02:01.0)
    plan = topology.plan("pve1", "amd", 2, model(DEFAULT_MODEL), 1)
    assert plan["iommu_groups"] == [
        {"group": 20, "devices": ["0000:00:01.1"]},
        {"group": 21, "devices": ["0000:01:00.0"]},
        {"group": 22, "devices": ["0000:02:00.0"]},
        {"group": 23, "devices": ["0000:02:01.0"]},
        {"group": 24, "devices": ["0000:03:00.0"]},
        {"group": 25, "devices": ["0000:04:00.0"]},
    ]


def test_the_listing_scripts_flat_and_grouped_forms_are_read() -> None:
    flat = (HOST / "iommu-groups" / "flat-laptop-gtx765m-shared-group-excerpt.txt").read_text()
    groups = {g["group"]: g["devices"] for g in iommu_groups.from_listing(flat)}
    # "IOMMU Group 1 00:01.0 ... / 01:00.0 ... [10de:11e1] / 01:00.1": the GTX 765M shares the root port's group
    assert groups[1] == ["0000:00:01.0", "0000:01:00.0", "0000:01:00.1"]
    grouped = (HOST / "iommu-groups" / "grouped-tab-8gpu-rtx2080ti-plx-excerpt.txt").read_text()
    groups = {g["group"]: g["devices"] for g in iommu_groups.from_listing(grouped)}
    # the excerpt starts with a child line of a group whose header was cut: that line belongs to no group
    assert "0000:19:0c.0" not in [d for ds in groups.values() for d in ds]
    assert groups[28] == ["0000:19:10.0"] and groups[29] == ["0000:19:14.0"]
    assert groups[30] == ["0000:1b:00.0", "0000:1b:00.1", "0000:1b:00.2", "0000:1b:00.3"]  # VGA, audio, USB, UCSI


def test_the_hgx_h100_host_keeps_its_shared_groups_on_the_replica(tmp_path: Path) -> None:
    r = _replica("h100-sxm5-8gpu-nvswitch-grub", tmp_path)
    groups = {g["group"]: g["devices"] for g in r.gpu_plan["iommu_groups"]}  # type: ignore[union-attr]
    # "IOMMU Group 29 0000:11:00.0 ..." and "IOMMU Group 29 0000:12:00.0 ...": two H100s in one group, as 86/87
    assert groups[29] == ["0000:11:00.0", "0000:12:00.0"] and groups[58] == ["0000:86:00.0", "0000:87:00.0"]
    assert groups[17] == ["0000:41:00.0"] and groups[50] == ["0000:be:00.0"]
    assert [groups[n] for n in (86, 87, 88, 89)] == [
        ["0000:05:00.0"],
        ["0000:06:00.0"],
        ["0000:07:00.0"],
        ["0000:08:00.0"],
    ]
