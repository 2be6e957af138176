"""The node's boot renders a replica's IOMMU groups (node data, from the host's listing) under
/sys/kernel/iommu_groups, as the kernel lays them out. It runs the node-side code in a private mount namespace
over scratch tmpfs mounts: no lab, no address, nothing on the host changes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lab_fixtures import SRC, require_lab_prerequisites

ROOT = Path(__file__).resolve().parents[3]
HOST = ROOT / "tests" / "fixtures" / "host" / "iommu-groups"
BOOT = """
import os, subprocess, sys, tempfile
from pathlib import Path
from gpuhost.lab.node import hardware_boot
from tests.unit.lab.test_replica_real_bundles import _replica
hw = _replica(sys.argv[1], Path(tempfile.mkdtemp())).gpu_plan
for g in hw["gpus"]:
    os.makedirs(f"/sys/bus/pci/devices/{g['bdf']}")
hardware_boot._iommu_groups(True, False, hw)
print(subprocess.run("find /sys/kernel/iommu_groups -mindepth 3 -maxdepth 3 | sort -V", shell=True,
                     capture_output=True, text=True, check=True).stdout, end="")
for g in hw["gpus"]:
    link = f"/sys/bus/pci/devices/{g['bdf']}/iommu_group"
    print(g["bdf"], os.path.basename(os.readlink(link)) if os.path.islink(link) else "-")
"""


def _boot(bundle: str) -> list[str]:
    require_lab_prerequisites()
    mounts = "mount -t tmpfs t /sys/kernel/iommu_groups && mount -t tmpfs t /sys/bus/pci/devices"
    r = subprocess.run(
        [
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            f'{mounts} && exec "$0" -c "$1" "$2"',
            sys.executable,
            BOOT,
            bundle,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={"PYTHONPATH": f"{SRC}:{ROOT}"},
    )
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


@pytest.mark.integration
def test_the_hgx_hosts_shared_groups_are_the_replicas() -> None:
    out = _boot("h100-sxm5-8gpu-nvswitch-grub")
    listed = (HOST / "flat-grep-nvidia-8x-h100-sxm5-4x-nvswitch.txt").read_text()
    expected = sorted(
        (
            f"/sys/kernel/iommu_groups/{n}/devices/{bdf}"
            for n, bdf in re.findall(r"^IOMMU Group (\d+) (\S+) ", listed, re.M)
        ),
        key=lambda p: (int(p.split("/")[4]), p),
    )
    assert [line for line in out if line.startswith("/sys/")] == expected  # the NVSwitches' groups too
    links = dict(line.split() for line in out if not line.startswith("/sys/"))
    assert links["0000:11:00.0"] == links["0000:12:00.0"] == "29" and links["0000:86:00.0"] == "58"


@pytest.mark.integration
def test_the_gpu_the_host_grouped_nowhere_has_no_group_on_the_replica() -> None:
    out = _boot("gtx1080ti-threadripper-no-iommu-group")
    listed = (HOST / "find-sorted-threadripper-gtx1080ti-has-no-group.txt").read_text().splitlines()[1:]
    assert [line for line in out if line.startswith("/sys/")] == listed  # the host's own listing, line for line
    assert "0000:43:00.0 -" in out
