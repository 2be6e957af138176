"""``gpuhost verify p2p`` as a user runs it: exit codes, JSON, heatmap, the no-driver message."""

from __future__ import annotations

import ctypes.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuhost.cli.app import _register, app
from tests.unit.p2p.captures import fixture

_register([])  # every command module, whatever this process was started with
runner = CliRunner()


def _run(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, ["verify", "p2p", *args])


def test_passing_capture_exits_0_and_prints_familiar_matrices() -> None:
    r = _run("--from-file", str(fixture("cuda-samples_9gpu-rtxpro6000-5090_pcie-p2p.txt")))
    assert r.exit_code == 0, r.output
    assert "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)" in r.output
    assert "PASS" in r.output


def test_failing_capture_exits_1_with_a_diagnosis() -> None:
    r = _run("--from-file", str(fixture("cuda-samples_2x-rtx4090_no-p2p.txt")))
    assert r.exit_code == 1
    assert "P2P unavailable" in r.output and "GeForce" in r.output


def test_json_output_is_one_object_with_verdicts_per_pair() -> None:
    r = _run("--from-file", str(fixture("probe_2x-h200-vm_nvlink.json")), "--json")
    assert r.exit_code == 0
    out = json.loads(r.output)
    assert out["schema"] == "gpuhost.verify-p2p/2" and out["verdict"] == "PASS"
    assert {(p["src"], p["dst"], p["path"], p["verdict"]) for p in out["pairs"]} == {
        (0, 1, "nvlink", "PASS"),
        (1, 0, "nvlink", "PASS"),
    }
    assert out["report"]["schema_version"] == 1


def test_own_json_output_can_serve_as_baseline(tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    base.write_text(_run("--from-file", str(fixture("probe_2x-h200-vm_nvlink.json")), "--json").output)
    r = _run("--from-file", str(fixture("probe_2x-h200-vm_nvlink.json")), "--baseline", str(base), "--json")
    assert r.exit_code == 0 and json.loads(r.output)["regressions"] == []


def test_regression_against_a_faster_baseline_fails(tmp_path: Path) -> None:
    data = json.loads(fixture("probe_2x-h200-vm_nvlink.json").read_text())
    data["pairs"][0]["p2p"]["uni"]["value"] = 500.0  # the baseline claims more than today's 394
    base = tmp_path / "base.json"
    base.write_text(json.dumps(data))
    r = _run("--from-file", str(fixture("probe_2x-h200-vm_nvlink.json")), "--baseline", str(base))
    assert r.exit_code == 1 and "baseline" in r.output


def test_heatmap_png_is_written(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "m.png"
    r = _run("--from-file", str(fixture("probe_2x-h200-vm_nvlink.json")), "--heatmap", str(png))
    assert r.exit_code == 0, r.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_heatmap_of_a_single_gpu_is_refused_with_exit_2(tmp_path: Path) -> None:
    r = _run("--from-file", str(fixture("probe_1x-h200-vm.json")), "--heatmap", str(tmp_path / "m.png"))
    assert r.exit_code == 2 and "no peer or staged matrices" in r.output


def test_bad_link_and_unreadable_file_are_usage_errors(tmp_path: Path) -> None:
    assert _run("--from-file", str(fixture("cuda-samples_2x-rtx4090_no-p2p.txt")), "--link", "pcie5").exit_code == 2
    assert _run("--from-file", str(tmp_path / "missing.txt")).exit_code == 2


@pytest.mark.skipif(ctypes.util.find_library("cuda") is not None, reason="an NVIDIA driver is installed here")
def test_local_run_without_a_driver_exits_2_naming_what_is_missing() -> None:
    r = _run("--no-nccl")
    assert r.exit_code == 2
    assert "CANNOT RUN" in r.output and "libcuda.so.1" in r.output and "NVML" in r.output


@pytest.mark.skipif(ctypes.util.find_library("cuda") is not None, reason="an NVIDIA driver is installed here")
def test_host_from_the_inventory_is_probed_through_its_connection(tmp_path: Path) -> None:
    inv = tmp_path / "inventory.yml"
    inv.write_text("nodes:\n  ctl:\n    address: 127.0.0.1\n    connection: local\n")
    r = _run("--host", "ctl", "-i", str(inv), "--no-nccl", "--json")
    assert r.exit_code == 2, r.output
    out = json.loads(r.output)
    assert out["target"] == "ctl" and out["verdict"] == "CANNOT RUN"


def test_unknown_host_and_host_without_inventory_are_usage_errors(tmp_path: Path) -> None:
    inv = tmp_path / "inventory.yml"
    inv.write_text("nodes:\n  ctl:\n    address: 127.0.0.1\n    connection: local\n")
    assert _run("--host", "other", "-i", str(inv)).exit_code == 2
    r = _run("--host", "ctl")
    assert r.exit_code == 2 and "-i INVENTORY" in r.output


def test_a_capture_with_one_bad_number_is_a_capture_error_not_a_flag_error(tmp_path: Path) -> None:
    # the real 2x RTX 4090 capture with one cell corrupted (21.73 -> 2.1.73), as a bad paste would
    text = fixture("cuda-samples_2x-rtx4090_no-p2p.txt").read_text()
    assert text.count(" 21.73 ") == 1
    bad = tmp_path / "pasted.txt"
    bad.write_text(text.replace(" 21.73 ", " 2.1.73 "))
    r = _run("--from-file", str(bad))
    assert r.exit_code == 2
    assert "--devices" not in r.output
    assert (
        f"{bad}: p2pBandwidthLatencyTest output that does not parse: could not convert string to float: '2.1.73'"
        in (" ".join(r.output.split()))
    )


def test_devices_that_are_not_ordinals_name_the_flag() -> None:
    r = _run("--devices", "0,x")
    assert r.exit_code == 2
    assert "--devices: '0,x' is not a comma list of CUDA ordinals such as 0,1" in r.output
