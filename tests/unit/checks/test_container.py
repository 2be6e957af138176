"""Container proofs from scenarios: real ``nvidia-smi`` captures (tests/fixtures/host/SOURCE.md) and states a user
can cause (a module updated on the host, /dev/nvidia-uvm not passed, a devN entry removed). Expected levels and
words are what an operator reading the finding needs, written here."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gpuhost.checks.container import (
    ContainerExpectation,
    cuda_init,
    device_nodes,
    devices_configured,
    driver_held,
    driver_match,
    gpus_listed,
    memlock,
    running,
    uvm,
)
from gpuhost.checks.finding import Level
from gpuhost.checks.table import container_findings
from gpuhost.facts.container import ContainerFacts
from gpuhost.pve import config as pveconf

NVIDIA = Path(__file__).resolve().parents[2] / "fixtures" / "host" / "nvidia"


def capture(name: str) -> str:
    """The capture without its prompt line (what the command printed)."""
    return "".join((NVIDIA / name).read_text().splitlines(keepends=True)[1:])


TWO_GPUS = capture("nvidia-smi-L-quadro-rtx4000-x2.txt")
MISMATCH = capture("lxd-nvidia-smi-version-mismatch.txt")

GOOD = ContainerFacts(
    nvidia_smi_exit=0,
    nvidia_smi_output=TWO_GPUS,
    userspace_version="535.183.01",
    uvm_present=True,
    memlock="unlimited",
    has_python=True,
    cuinit_exit=0,
    cuinit_output="0 CUDA_SUCCESS 2\n",
)


def test_a_good_container_passes_every_proof_naming_what_it_saw() -> None:
    fs = container_findings(GOOD, "pve1/CT 200", ContainerExpectation(gpus=2, driver="535.183.01"))
    assert [(f.check, f.level, f.message) for f in fs] == [
        ("ct.gpus_listed", Level.PASS, "nvidia-smi -L lists 2 GPUs"),
        ("ct.driver_match", Level.PASS, "container userspace 535.183.01 = host module 535.183.01"),
        ("ct.uvm", Level.PASS, "/dev/nvidia-uvm present"),
        ("ct.memlock", Level.PASS, "ulimit -l unlimited"),
        ("ct.cuda_init", Level.PASS, "cuInit ok, 2 CUDA devices"),
    ]
    assert {f.subject for f in fs} == {"pve1/CT 200"}
    bad = container_findings(replace(GOOD, nvidia_smi_exit=9), "pve1/CT 201", ContainerExpectation(gpus=3, driver="1"))
    assert {f.subject for f in bad} == {"pve1/CT 201"} and bad[0].level is Level.FAIL


def test_without_an_expected_driver_the_version_is_not_compared() -> None:
    fs = container_findings(GOOD, "s", ContainerExpectation())
    assert "ct.driver_match" not in {f.check for f in fs}


@pytest.mark.parametrize("host", ["535.183.06", "535.183", "550.54.14"])
def test_a_userspace_of_another_version_than_the_module_fails(host: str) -> None:
    f = driver_match(GOOD, "s", ContainerExpectation(driver=host))
    assert f.level is Level.FAIL and f.message == f"container userspace 535.183.01, host module {host}"
    assert f.fix == "gpuhost provision lxc"


def test_no_userspace_at_all_fails_the_version_proof() -> None:
    f = driver_match(replace(GOOD, userspace_version=None), "s", ContainerExpectation(driver="535.183.01"))
    assert f.level is Level.FAIL and f.message == "container userspace not installed, host module 535.183.01"


def test_the_real_version_mismatch_output_fails_listing_with_its_cause() -> None:
    f = gpus_listed(replace(GOOD, nvidia_smi_exit=18, nvidia_smi_output=MISMATCH), "s", ContainerExpectation(gpus=2))
    assert f.level is Level.FAIL and f.message == "nvidia-smi -L failed in the container"
    assert f.cause and "version" in f.cause.lower()


@pytest.mark.parametrize("expected, level", [(2, Level.PASS), (0, Level.PASS), (1, Level.FAIL), (4, Level.FAIL)])
def test_the_gpu_count_must_be_the_expected_one(expected: int, level: Level) -> None:
    assert gpus_listed(GOOD, "s", ContainerExpectation(gpus=expected)).level is level


def test_no_gpu_listed_fails_even_when_any_count_would_do() -> None:
    f = gpus_listed(replace(GOOD, nvidia_smi_output="No devices found.\n"), "s", ContainerExpectation(gpus=0))
    assert f.level is Level.FAIL and f.message == "nvidia-smi -L lists 0 GPUs, expected at least 1"


def test_uvm_memlock_and_their_fixes() -> None:
    f = uvm(replace(GOOD, uvm_present=False), "s", ContainerExpectation())
    assert f.level is Level.FAIL and f.fix == "gpuhost provision lxc --allow-restart"
    m = memlock(replace(GOOD, memlock="8192"), "s", ContainerExpectation())
    assert m.level is Level.FAIL and m.message == "ulimit -l is 8192 in the container"
    assert memlock(replace(GOOD, memlock=""), "s", ContainerExpectation()).message == "ulimit -l is ? in the container"


@pytest.mark.parametrize(
    "exit_code, output, level, message",
    [
        (3, "", Level.FAIL, "libcuda.so.1 not found in the container"),
        (0, "999 CUDA_ERROR_UNKNOWN 0\n", Level.FAIL, "cuInit returned 999 CUDA_ERROR_UNKNOWN"),
        (0, "100 CUDA_ERROR_NO_DEVICE 0\n", Level.FAIL, "cuInit returned 100 CUDA_ERROR_NO_DEVICE"),
        (1, "Traceback ...", Level.FAIL, "cuInit check failed: Traceback ..."),
        (0, "garbage", Level.FAIL, "cuInit check failed: garbage"),
        (0, "0 CUDA_SUCCESS", Level.PASS, "cuInit ok, ? CUDA devices"),
    ],
)
def test_cuinit_outcomes(exit_code: int, output: str, level: Level, message: str) -> None:
    f = cuda_init(replace(GOOD, cuinit_exit=exit_code, cuinit_output=output), "s", ContainerExpectation())
    assert f is not None and (f.level, f.message) == (level, message)


def test_cuinit_unknown_error_names_uvm_as_the_cause() -> None:
    f = cuda_init(replace(GOOD, cuinit_output="999 CUDA_ERROR_UNKNOWN 0\n"), "s", ContainerExpectation())
    assert f is not None and f.cause == "/dev/nvidia-uvm missing or not allowed"
    other = cuda_init(replace(GOOD, cuinit_output="100 CUDA_ERROR_NO_DEVICE 0\n"), "s", ContainerExpectation())
    assert other is not None and other.cause is None


def test_no_python_is_information_not_a_failure() -> None:
    f = cuda_init(replace(GOOD, has_python=False), "s", ContainerExpectation())
    assert f is not None and f.level is Level.INFO


@pytest.mark.parametrize("status, level", [("running", Level.PASS), ("stopped", Level.FAIL), (None, Level.FAIL)])
def test_running(status: str | None, level: Level) -> None:
    f = running(status, "s", 200)
    assert f.level is level
    assert (
        f.message == {"running": "CT 200 is running", "stopped": "CT 200 is stopped", None: "CT 200 is absent"}[status]
    )


NODES = ["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"]


def test_devices_configured_by_devn_entries_and_by_old_bind_mounts() -> None:
    devn = pveconf.parse(
        "arch: amd64\ndev0: /dev/nvidia0,gid=44\ndev1: /dev/nvidiactl,gid=44\ndev2: /dev/nvidia-uvm,gid=44\n", "lxc"
    )
    assert devices_configured(devn, "s", 200, NODES).level is Level.PASS
    mounts = pveconf.parse(
        "arch: amd64\n"
        "lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\n"
        "lxc.mount.entry: /dev/nvidiactl dev/nvidiactl none bind,optional,create=file\n"
        "lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\n",
        "lxc",
    )
    assert devices_configured(mounts, "s", 200, NODES).level is Level.PASS


def test_a_devn_entry_with_options_or_a_bind_mount_with_a_trailing_field_counts_by_its_path() -> None:
    c = pveconf.parse(
        "arch: amd64\ndev0: /dev/nvidia0,gid=44,mode=0666\ndev1: /dev/nvidiactl\n"
        "lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\nlxc.mount.entry:\n",
        "lxc",
    )
    assert devices_configured(c, "s", 200, NODES).level is Level.PASS


def test_a_removed_devn_entry_is_named() -> None:
    conf = pveconf.parse("arch: amd64\ndev0: /dev/nvidia0,gid=44\ndev1: /dev/nvidiactl,gid=44\n", "lxc")
    f = devices_configured(conf, "s", 200, NODES)
    assert f.level is Level.FAIL and f.message == "/etc/pve/lxc/200.conf does not pass /dev/nvidia-uvm"
    absent = devices_configured(None, "s", 200, NODES)
    assert absent.level is Level.FAIL and absent.message == "/etc/pve/lxc/200.conf does not exist"


def test_device_nodes_inside() -> None:
    assert device_nodes(set(NODES), "s", NODES).message == "3 device nodes present"
    f = device_nodes({"/dev/nvidia0"}, "s", NODES)
    assert f.level is Level.FAIL and f.message == "missing inside the container: /dev/nvidiactl, /dev/nvidia-uvm"


HOLD = "Package: nvidia-* libnvidia-* libcuda* libnvcuvid* libnvoptix*\nPin: release *\nPin-Priority: -1\n"


@pytest.mark.parametrize(
    "text, level",
    [
        (HOLD, Level.PASS),
        (HOLD.replace("-1", "500"), Level.FAIL),
        ("Package: libcuda*\nPin: release *\nPin-Priority: -1\n", Level.FAIL),
        ("", Level.FAIL),
        (None, Level.FAIL),
    ],
)
def test_the_apt_hold(text: str | None, level: Level) -> None:
    f = driver_held(text, "s")
    assert f.level is level
    if text is None:
        assert f.message == "/etc/apt/preferences.d/gpuhost-nvidia.pref is missing"


def test_the_mismatch_explanation_names_the_host_module_when_known() -> None:
    from gpuhost.checks.container import explain_nvidia_smi_failure

    cause, fix = explain_nvidia_smi_failure(MISMATCH, "570.133.20")
    assert cause.endswith("differs from the host's kernel module: kernel module (570.133.20)")
    assert "--no-kernel-modules" in fix
    plain, _ = explain_nvidia_smi_failure(MISMATCH)
    assert (
        plain
        == "driver/library version mismatch: the container's NVIDIA userspace differs from the host's kernel module"
    )
