"""Bad input at the edges: exit 2 with file and line, never ``internal error`` (issue 31, item 8)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.cli.test_malformed_input import Listener, _run, _write, inventory_text


@pytest.fixture(scope="module")
def listener() -> Listener:
    return Listener()


PLAY = "- hosts: all\n  tasks: []\n"


def test_a_3000_deep_yaml_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], listener: Listener) -> None:
    top = "vars: {a: " + "[" * 3000 + "]" * 3000 + "}\n"
    inv = _write(tmp_path, "inventory.yml", inventory_text(listener.port, top=top))
    code, out = _run(capsys, ["run", str(_write(tmp_path, "play.yml", PLAY)), "-i", str(inv)])
    assert code == 2, out
    assert "inventory.yml" in out and "nested more than" in out and "internal error" not in out, out


def test_a_70_deep_yaml_names_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], listener: Listener) -> None:
    top = "vars:\n  a: " + "[" * 70 + "]" * 70 + "\n"
    inv = _write(tmp_path, "inventory.yml", inventory_text(listener.port, top=top))
    code, out = _run(capsys, ["run", str(_write(tmp_path, "play.yml", PLAY)), "-i", str(inv)])
    assert code == 2, out
    assert "inventory.yml:2" in out and "nested more than 64 levels" in out, out


def test_guest_id_written_as_number_and_string_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listener: Listener
) -> None:
    extra = '    containers:\n      200: {hostname: a}\n      "200": {hostname: b}\n'
    inv = _write(tmp_path, "inventory.yml", inventory_text(listener.port, node_extra=extra))
    before = listener.accepted
    code, out = _run(capsys, ["run", str(_write(tmp_path, "play.yml", PLAY)), "-i", str(inv)])
    assert code == 2, out
    assert "inventory.yml:5" in out and "field 'nodes.pve1.containers'" in out and "written twice" in out, out
    assert listener.accepted == before


def test_json_on_bad_input_prints_a_json_error_on_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listener: Listener
) -> None:
    inv = _write(tmp_path, "inventory.yml", "nodes:\n  pve1:\n    address: 300.1.1.1\n")
    import contextlib

    from gpuhost.cli.app import main

    with contextlib.suppress(SystemExit):
        main(["run", str(_write(tmp_path, "play.yml", PLAY)), "-i", str(inv), "--json"])
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["schema"] == "gpuhost.error/1" and data["ok"] is False and data["exit_code"] == 2
    assert "inventory.yml:3" in data["error"] and "nodes.pve1.address" in data["error"]
    assert "error:" in captured.err


P2P = Path(__file__).resolve().parents[2] / "fixtures" / "p2p"


def test_heatmap_into_a_missing_folder_is_a_clean_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capture = str(P2P / "cuda-samples_2x-rtx4090_no-p2p.txt")
    code, out = _run(capsys, ["verify", "p2p", "--from-file", capture, "--heatmap", str(tmp_path / "no" / "x.png")])
    assert code == 2, out
    assert "cannot use" in out and "No such file or directory" in out and "internal error" not in out, out


def test_p2p_capture_with_a_terminal_title_sequence_prints_it_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (P2P / "cuda-samples_2x-rtx4090_no-p2p.txt").read_text()
    planted = tmp_path / "capture.txt"
    planted.write_text(text.replace("NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090\x1b]0;owned\x07", 1))
    code, out = _run(capsys, ["verify", "p2p", "--from-file", str(planted)])
    assert "\x1b" not in out and "\x07" not in out
    assert "RTX 4090\\x1b]0;owned" in out, out


def test_tls_failure_and_unreachable_api_are_exit_1_with_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    import requests

    from gpuhost.cli.failures import report

    tls = requests.exceptions.SSLError(
        "HTTPSConnectionPool(host='127.0.0.1', port=8006): Max retries exceeded (Caused by SSLError("
        "SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed "
        "certificate in certificate chain (_ssl.c:1000)')))"
    )
    assert report(tls) == 1
    down = requests.exceptions.ConnectionError(
        "HTTPSConnectionPool(host='127.0.0.1', port=8006): Max retries exceeded (Caused by NewConnectionError("
        "'Failed to establish a new connection: [Errno 111] Connection refused'))"
    )
    assert report(down) == 1
    err = capsys.readouterr().err
    assert "TLS failure" in err and "api.ca_file" in err and "pve-root-ca.pem" in err
    assert "cannot reach the PVE API" in err and "pveproxy" in err
    assert "internal error" not in err


def test_recap_names_a_vm_as_a_vm() -> None:
    from gpuhost.cli.output import _notes
    from gpuhost.core.guest import Guest
    from gpuhost.runner.results import HostSummary

    s = HostSummary(restart_required=[110, 200], restart_guests=[str(Guest.vm(110)), str(Guest.ct(200))])
    assert _notes(s) == "restart required: VM 110, CT 200 (--allow-restart)"
    assert "restart_guests" not in s.to_json() and s.to_json()["restart_required"] == [110, 200]
