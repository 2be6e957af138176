"""A capture over a connection: one round trip, every command's exit code kept, outputs cut at the per-file
budget on the host, a bundle written all or nothing (an interrupted capture leaves none)."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from gpuhost.capture.bundle import Budget, CaptureError, manifest, write_bundle
from gpuhost.capture.probes import PROBES, Probe, _cat_each
from gpuhost.capture.take import take
from gpuhost.connection.local import LocalConnection


def _probes(tmp_path: Path) -> list[Probe]:
    conf = tmp_path / "lxc"
    conf.mkdir()
    (conf / "101.conf").write_text("arch: amd64\ncores: 8\n")
    (conf / "102.conf").write_text("#password=hunter2hunter2\nmemory: 4096\n")
    (conf / "link.conf").symlink_to("/etc/passwd")  # a link is never followed
    return [
        Probe("fs/one", "printf 'a\\nb\\n'"),
        Probe("cmd/missing", "exit 3"),
        Probe("cmd/big", "head -c 5000 /dev/zero | tr '\\0' x"),
        Probe("fs/etc/pve/lxc", _cat_each(f"{conf}/*.conf"), many=True),
    ]


def test_every_probe_lands_in_one_round_trip_with_its_exit_code(tmp_path: Path) -> None:
    conn = LocalConnection("node")
    files, shown, _ = take(conn, "node", budget=Budget(per_file=1000, total=1 << 20), probes=_probes(tmp_path))
    assert conn.commands_run == 1
    by_path = {f.path: f for f in files}
    assert sorted(by_path) == [
        "files/cmd/big",
        "files/cmd/missing",
        "files/fs/etc/pve/lxc/101.conf",
        "files/fs/etc/pve/lxc/102.conf",
        "files/fs/one",
    ]
    assert (by_path["files/fs/one"].data, by_path["files/fs/one"].exit_code) == (b"a\nb\n", 0)
    assert (by_path["files/cmd/missing"].data, by_path["files/cmd/missing"].exit_code) == (b"", 3)
    big = by_path["files/cmd/big"]
    assert (len(big.data), big.truncated) == (1000, True)
    lxc = by_path["files/fs/etc/pve/lxc/102.conf"]
    assert lxc.data == b"# gpuhost-capture: line removed (it looked like a secret)\nmemory: 4096\n"
    assert lxc.scrubbed_lines == 1 and lxc.source.endswith("/lxc/102.conf")
    assert shown == "node"


def test_the_manifest_lists_each_file_with_its_command_exit_and_sha256(tmp_path: Path) -> None:
    files, shown, taken = take(LocalConnection("node"), "node", probes=_probes(tmp_path))
    target = tmp_path / "node.capture.tar.gz"
    write_bundle(target, manifest(shown, files, taken=taken, anonymised=False, budget=Budget()), files, Budget())
    with tarfile.open(target) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
    doc = json.loads(members.pop("manifest.json"))
    assert doc["schema"] == "gpuhost-capture/1"
    assert {e["path"] for e in doc["files"]} == set(members)
    for e in doc["files"]:
        assert e["sha256"] == hashlib.sha256(members[e["path"]]).hexdigest()
    missing = next(e for e in doc["files"] if e["path"] == "files/cmd/missing")
    assert (missing["command"], missing["exit"]) == ("exit 3", 3)
    assert list(tmp_path.glob("*.partial")) == []


def test_over_the_total_budget_no_bundle_is_written(tmp_path: Path) -> None:
    budget = Budget(per_file=1 << 20, total=100)
    files, shown, taken = take(LocalConnection("node"), "node", budget=budget, probes=_probes(tmp_path))
    target = tmp_path / "node.capture.tar.gz"
    with pytest.raises(CaptureError, match="over the bundle's budget of 100"):
        write_bundle(target, manifest(shown, files, taken=taken, anonymised=False, budget=budget), files, budget)
    assert list(tmp_path.glob("node.capture.tar.gz*")) == [] and list(tmp_path.glob(".node*")) == []


def test_no_probe_reads_pve_priv_ssh_keys_or_token_files() -> None:
    for p in PROBES:
        for banned in ("/etc/pve/priv", "/root/.ssh", "ssh_host_", "id_rsa", "id_ed25519", "token.cfg", "authkey"):
            assert banned not in p.command, p


_SLOW_CAPTURE = """
import sys
from pathlib import Path
from gpuhost.capture.bundle import Budget, manifest, write_bundle
from gpuhost.capture.probes import Probe
from gpuhost.capture.take import take
from gpuhost.connection.local import LocalConnection
print("started", flush=True)
files, shown, taken = take(LocalConnection("n"), "n", probes=[Probe("cmd/slow", "sleep 30")])
write_bundle(Path(sys.argv[1]), manifest(shown, files, taken=taken, anonymised=False, budget=Budget()), files, Budget())
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_an_interrupted_capture_leaves_no_bundle(tmp_path: Path, sig: signal.Signals) -> None:
    target = tmp_path / "n.capture.tar.gz"
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_CAPTURE, str(target)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
    time.sleep(0.5)
    proc.send_signal(sig)
    proc.wait(timeout=30)
    assert proc.returncode != 0
    assert list(tmp_path.iterdir()) == []
