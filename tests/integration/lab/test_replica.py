"""``gpuhost capture`` of a lab node, then ``gpuhost lab up --from-capture``: the replica's facts are the source's.

One source lab for the module with a node of each preset shape ``gpuhost lab up``'s flags make (every value of
--boot, --cpu and --pve, GPUs on one and on two NUMA nodes, two GPU models, a node without GPUs, --vm), and one
replica per shape, each started and stopped by the CLI as an operator would.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuhost.lab import manager
from gpuhost.lab.spec import NodeSpec
from tests.lab_fixtures import SRC, LabHandle, gpuhost_cli, lab_address, start_lab

MODEL = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
#: the preset shapes: node name -> (lab up flags it stands for, GPUs it has)
SHAPES = {
    "capgrub": ("--boot grub --cpu intel --pve 8 --gpus 2", 2),
    "capsd": ("--boot systemd-boot --cpu amd --pve 9 --gpus 4 --numa 2", 4),
    "cappbt": ("--boot grub-pbt --cpu amd --pve 8 --gpus 1 --gpu-model 'NVIDIA L40S' --vm 110", 1),
    "capplain": ("(no flags: systemd-boot, amd, PVE 8, no GPUs)", 0),
}
#: planted on the source nodes: none may appear in a bundle
PLANTED_DESCRIPTION = "hf_PlantedCaptureSecret0123456789abcdef"
PLANTED_PRIV = "planted-priv-secret-9f8e7d6c5b4a"
VM_CONF = (
    f"#my hub token%3A hf_token={PLANTED_DESCRIPTION}\n"
    "#second line of the description\n"
    "boot: order=scsi0\ncores: 4\nmemory: 8192\nname: secretvm\nostype: l26\nscsi0: local-lvm:vm-150-disk-0,size=32G\n"
)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabHandle]:
    state = tmp_path_factory.mktemp("capture-source") / "state"
    handle = start_lab(
        state,
        [
            NodeSpec("capgrub", lab_address(7, 1), boot="grub", cpu="intel", pve=8, gpus=2, gpu_model=MODEL),
            NodeSpec(
                "capsd", lab_address(7, 2), boot="systemd-boot", cpu="amd", pve=9, gpus=4, gpu_model=MODEL, numa=2
            ),
            NodeSpec(
                "cappbt",
                lab_address(7, 3),
                boot="grub-pbt",
                cpu="amd",
                pve=8,
                gpus=1,
                gpu_model="NVIDIA L40S",
                gpu_vm=110,
            ),
            NodeSpec("capplain", lab_address(7, 4)),
        ],
    )
    try:
        for name in SHAPES:
            r = handle.run(
                name,
                f"printf %s '{VM_CONF}' > /etc/pve/qemu-server/150.conf && "
                f"echo 'token: {PLANTED_PRIV}' > /etc/pve/priv/planted.cfg",
            )
            assert r.rc == 0, r.stderr
        yield handle
    finally:
        handle.close()
        manager.down(state)


def _lab(*args: str) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": SRC, "COLUMNS": "200", "NO_COLOR": "1", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    return subprocess.run([sys.executable, "-m", "gpuhost", "lab", *args], capture_output=True, text=True, env=env)


def _facts(inventory: Path, node: str) -> dict[str, object]:
    r = gpuhost_cli(inventory, "facts", node, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    facts = json.loads(r.stdout)["facts"]
    assert isinstance(facts, dict)
    return facts


def _on_replica(state: Path, command: str) -> str:
    ssh = ["ssh", "-i", str(state / "client_key"), "-o", f"UserKnownHostsFile={state / 'known_hosts'}"]
    r = subprocess.run(
        [*ssh, "-o", "BatchMode=yes", f"root@{lab_address(7, 10)}", command], capture_output=True, text=True, timeout=30
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def _members(bundle: Path) -> dict[str, bytes]:
    with tarfile.open(bundle) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


@pytest.mark.parametrize("node", sorted(SHAPES))
def test_a_replica_from_a_capture_has_the_facts_of_its_source(source: LabHandle, node: str, tmp_path: Path) -> None:
    bundle = tmp_path / f"{node}.capture.tar.gz"
    r = gpuhost_cli(source.inventory, "capture", node, "-o", str(bundle), "--anonymise")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "line(s) that looked like secrets were removed" in r.stdout

    files = _members(bundle)
    everything = b"".join(files.values()) + json.dumps(sorted(files)).encode()
    for secret in (PLANTED_DESCRIPTION, PLANTED_PRIV, source.token(node)):
        assert secret.encode() not in everything
    assert node.encode() not in everything  # anonymised: the node is node1 everywhere
    assert source.node(node).address.encode() not in everything
    manifest = json.loads(files["manifest.json"])
    assert manifest["schema"] == "gpuhost-capture/1" and manifest["node"] == "node1"
    vm = files["files/fs/etc/pve/qemu-server/150.conf"].decode()
    assert vm.splitlines()[0] == "# gpuhost-capture: line removed (it looked like a secret)"
    assert "#second line of the description" in vm and "memory: 8192" in vm

    state = tmp_path / "replica"
    up = _lab("up", "--from-capture", str(bundle), "--address", lab_address(7, 10), "--state-dir", str(state))
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert "not reproduced by the lab:" in up.stdout
        assert "real CUDA" in up.stdout
        before, after = _facts(source.inventory, node), _facts(state / "inventory.yml", "node1")
        for volatile in ("hostname", "boot_id"):
            before.pop(volatile), after.pop(volatile)
        assert after == before
        assert len(after["gpus"]) == SHAPES[node][1]  # type: ignore[arg-type]
        # the host's guest config (its secret line scrubbed) is the replica's
        assert _on_replica(state, "cat /etc/pve/qemu-server/150.conf") == vm
        # the same PCI tree (GPUs, bridges, NUMA nodes) and the same IOMMU groups
        tree = "lspci -D -nnvv; find /sys/kernel/iommu_groups -mindepth 3 -maxdepth 3 | sort"
        assert _on_replica(state, tree) == source.run(node, tree).stdout
    finally:
        _lab("down", "--state-dir", str(state))


def test_a_hostile_bundle_is_refused_with_exit_2_and_no_lab(tmp_path: Path) -> None:
    bundle = tmp_path / "evil.capture.tar.gz"
    with tarfile.open(bundle, "w:gz") as tar:
        info = tarfile.TarInfo("../../etc/cron.d/evil")
        data = b"* * * * * root true\n"
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    state = tmp_path / "state"
    r = _lab("up", "--from-capture", str(bundle), "--address", lab_address(7, 20), "--state-dir", str(state))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "leaves the bundle" in r.stdout + r.stderr
    assert not state.exists()
