"""`gpuhost doctor` on staged seed situations: it names the staged cause as its top finding with the fix, and the
command it prints, run, makes that finding go away on the next doctor run."""

import shlex
import sys

import pytest
from ruamel.yaml import YAML

from tests.integration.provision.conftest import gpuhost, run_json

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def lab(make_lab):
    handle = make_lab([("systemd-boot", "amd")])
    # a node without GPUs: the host path only (gpu_path none), beside the lab's own inventory (its key paths)
    yaml = YAML()
    doc = yaml.load(handle.inventory.read_text())
    doc["nodes"]["pve1"]["vars"]["gpu_path"] = "none"
    with (handle.inventory.parent / "doctor.yml").open("w") as out:
        yaml.dump(doc, out)
    return handle


def inv(lab):
    return lab.inventory.parent / "doctor.yml"


def doctor(lab):
    code, doc = run_json("doctor", "-i", str(inv(lab)))
    assert doc["schema"] == "gpuhost.doctor/1"
    return code, doc


def run_fix(command):
    words = shlex.split(command)
    assert words[0] == "gpuhost"
    r = gpuhost(*words[1:], timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_tokens_in_the_wrong_boot_file_are_the_top_finding_and_the_fix_clears_them(lab):
    # the seed's mistake: the IOMMU tokens go into /etc/default/grub of a host that boots with systemd-boot
    lab.run(
        "pve1",
        "sed -i 's/^GRUB_CMDLINE_LINUX_DEFAULT=.*/GRUB_CMDLINE_LINUX_DEFAULT=\"quiet iommu=pt amd_iommu=on\"/'"
        " /etc/default/grub && update-grub >/dev/null 2>&1; true",
    )
    boots = lab.boots("pve1")
    lab.run("pve1", "nohup sh -c 'sleep 0.5; reboot' >/dev/null 2>&1 &")
    lab.wait_rebooted("pve1", boots)
    before = lab.run("pve1", "md5sum /etc/default/grub /etc/kernel/cmdline").stdout

    code, doc = doctor(lab)
    assert code == 1
    top = doc["findings"][0]
    assert (top["check"], top["subject"], top["level"]) == ("host.cmdline_booted", "pve1", "FAIL")
    assert top["message"] == "/proc/cmdline lacks iommu=pt amd_iommu=on"
    assert top["cause"].startswith(
        "iommu=pt amd_iommu=on is in /etc/default/grub, but this host boots with systemd-boot, which reads "
        "/etc/kernel/cmdline"
    )
    assert top["command"] == f"gpuhost provision host -i {inv(lab)} --limit pve1 --allow-reboot"
    assert top["docs"] == "troubleshooting.md#host-cmdline_booted"
    assert doc["findings"][1]["check"] == "host.cmdline_configured"
    assert lab.run("pve1", "md5sum /etc/default/grub /etc/kernel/cmdline").stdout == before  # read-only

    text = gpuhost("doctor", "-i", str(inv(lab)))
    assert text.returncode == 1
    assert text.stdout.startswith(" 1. FAIL host.cmdline_booted  pve1  [host]"), text.stdout
    sys.stdout.write(text.stdout)  # the docs' example run (pytest -s)

    run_fix(top["command"])
    assert "iommu=pt" in lab.run("pve1", "cat /proc/cmdline").stdout
    _code, after = doctor(lab)
    assert not [f for f in after["findings"] if f["check"].startswith("host.cmdline")], after["findings"]
