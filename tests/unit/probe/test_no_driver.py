"""Where no NVIDIA driver exists the probe must say so in JSON and exit 2, never crash."""

from __future__ import annotations

import ctypes.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuhost.p2p.bundle import build_probe_zip
from gpuhost.probe import SCHEMA_VERSION
from gpuhost.probe.cuda import CudaDriver, CudaUnavailable

SRC = Path(__file__).resolve().parents[3] / "src"
HAS_DRIVER = ctypes.util.find_library("cuda") is not None or ctypes.util.find_library("nvidia-ml") is not None
no_driver_only = pytest.mark.skipif(HAS_DRIVER, reason="an NVIDIA driver is installed here")


def test_missing_libcuda_is_reported_with_the_library_name() -> None:
    with pytest.raises(CudaUnavailable, match="libcuda-does-not-exist.so"):
        CudaDriver("libcuda-does-not-exist.so")


@no_driver_only
def test_module_run_prints_json_naming_what_is_missing() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "gpuhost.probe", "--nccl", "off"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert out.returncode == 2
    report = json.loads(out.stdout)
    assert report["schema_version"] == SCHEMA_VERSION
    assert report["status"] == "cannot_run"
    stages = {e["stage"]: e["message"] for e in report["errors"]}
    assert "libcuda.so.1" in stages["cuda"]
    assert "NVML" in stages["nvml"]
    assert report["nvidia_smi"]["available"] is False
    assert report["host"]["kernel"]


@no_driver_only
def test_zipapp_runs_from_a_copied_directory_with_its_own_pynvml(tmp_path: Path) -> None:
    pyz = tmp_path / "probe.pyz"
    pyz.write_bytes(build_probe_zip())
    # -I: isolated, so neither gpuhost nor a pynvml from this venv can be imported.
    out = subprocess.run(
        [sys.executable, "-I", str(pyz), "--nccl", "off"], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert out.returncode == 2, out.stderr
    report = json.loads(out.stdout)
    nvml = next(e["message"] for e in report["errors"] if e["stage"] == "nvml")
    # The shipped pynvml was imported: the failure is NVML's own, not a missing module.
    assert "pynvml module is not available" not in nvml
    assert "nvmlInit failed" in nvml


def test_bad_arguments_are_refused() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "gpuhost.probe", "--lat-reps", "5000"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(SRC)},
        timeout=60,
    )
    assert out.returncode == 2
    assert "queue" in out.stderr


def test_without_cuda_the_report_still_lists_what_nvml_sees(monkeypatch: pytest.MonkeyPatch) -> None:
    """An LXC whose /dev/nvidia-uvm is missing: NVML works, cuInit fails."""
    from gpuhost.probe import report as report_mod
    from gpuhost.probe.cuda import CudaError
    from gpuhost.probe.measure import Settings

    class FakeNvml:
        error = None
        ok = True

        def __init__(self) -> None:
            import pynvml

            self.nv = pynvml

        def system(self) -> dict:  # type: ignore[type-arg]
            return {"driver_version": "580.159.04"}

        def handles(self) -> list:  # type: ignore[type-arg]
            return ["h0", "h1"]

        def gpu(self, h: str) -> dict:  # type: ignore[type-arg]
            return {"name": "NVIDIA H200", "bus_id": {"h0": "00000000:06:00.0", "h1": "00000000:07:00.0"}[h]}

        def pair(self, a: str, b: str) -> dict:  # type: ignore[type-arg]
            return {"status": {"read": "CNS", "write": "CNS"}, "topology": "PHB"}

        def shutdown(self) -> None:
            pass

    def no_cuda() -> None:
        raise CudaError("cuInit", 999, "CUDA_ERROR_UNKNOWN", "unknown error")

    monkeypatch.setattr(report_mod, "Nvml", FakeNvml)
    monkeypatch.setattr(report_mod, "load_driver", no_cuda)
    monkeypatch.setattr(report_mod, "nvidia_smi_facts", lambda: {"available": False, "error": "not on PATH"})
    probe = report_mod.Probe(Settings(), nccl="off")
    assert probe.run() == 2
    r = probe.report
    assert r["status"] == "cannot_run"
    err = next(e for e in r["errors"] if e["stage"] == "cuda")
    assert err["code"] == "CUDA_ERROR_UNKNOWN" and "nvidia-uvm" in err["hint"]
    assert [g["bus_id"] for g in r["gpus"]] == ["00000000:06:00.0", "00000000:07:00.0"]
    assert r["pairs"][0]["nvml"]["status"]["read"] == "CNS"
