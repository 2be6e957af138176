"""The NVIDIA .run installer's log and output, on real captures (tests/fixtures/host/nvidia-installer, SOURCE.md)."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuhost.checks import Level
from gpuhost.checks.installer import nvidia_installer
from gpuhost.cli.app import _register, app
from gpuhost.facts.nvidia_installer import parse_installer_log

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "host" / "nvidia-installer"

_register()


def log(name: str):
    return parse_installer_log((FIX / name).read_text())


def test_module_in_use_says_stop_the_users_and_unload():
    r = log("installer-log-module-already-loaded-460.txt")
    assert r.version == "460.73.01"
    assert r.errors[0].startswith("An NVIDIA kernel module 'nvidia-drm' appears to already be loaded")
    assert r.cause and r.cause.startswith("an NVIDIA kernel module (nvidia-drm) is loaded and in use")
    assert r.fix and "rmmod nvidia_drm nvidia_modeset nvidia_uvm nvidia" in r.fix


@pytest.mark.parametrize(
    "name", ["installer-output-dkms-conf-unable-to-load-nvidia-ko.txt", "installer-output-wrapped-dkms-conf-418.txt"]
)
def test_module_refused_by_the_kernel_points_at_nouveau_secure_boot_and_headers(name: str):
    r = log(name)
    assert r.errors[0] == "Unable to open 'kernel/dkms.conf' for copying (No such file or directory)"  # wrap joined
    assert r.errors[1].startswith("Unable to load the kernel module 'nvidia.ko'.  This happens most frequently")
    assert r.cause and "Secure Boot" in r.cause and "nouveau" in r.cause
    assert r.fix and "Kernel module load error" in r.fix


def test_dkms_build_failure_on_pve_names_driver_and_kernel():
    r = log("installer-dkms-build-failed-pve-5.15.txt")
    assert r.cause == (
        "DKMS could not build the NVIDIA 460.107 module for kernel 5.15.27-1-pve: the driver is older than the "
        "kernel, or the kernel's headers are missing"
    )
    assert r.fix and "headers" in r.fix and "make.log" in r.fix


def test_finding_and_doctor_exit_codes(tmp_path: Path):
    f = nvidia_installer(log("installer-output-dkms-conf-unable-to-load-nvidia-ko.txt"), "pve1")
    assert f.level is Level.FAIL and f.message.endswith("(and 2 more)")
    r = CliRunner().invoke(app, ["doctor", "nvidia-installer", str(FIX / "installer-dkms-build-failed-pve-5.15.txt")])
    assert r.exit_code == 1 and "FAIL installer.nvidia" in r.output
    clean = tmp_path / "ok.log"
    clean.write_text((FIX / "installer-log-module-already-loaded-460.txt").read_text().split("ERROR:")[0])
    assert CliRunner().invoke(app, ["doctor", "nvidia-installer", str(clean)]).exit_code == 0
    assert CliRunner().invoke(app, ["doctor", "nvidia-installer", str(tmp_path / "absent")]).exit_code == 2
