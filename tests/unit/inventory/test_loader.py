import os
from pathlib import Path

import pytest

from gpuhost.errors import InventoryError, SecretError
from gpuhost.inventory.loader import load_inventory
from gpuhost.redact import redact
from gpuhost.secrets import read_secret


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "inv.yml"
    p.write_text(text)
    return p


GOOD = """\
vars: {driver: "580.95.05", level: inventory}
nodes:
  pve1:
    address: 127.0.9.1
    ssh:
      key_file: keys/id
      known_hosts_file: known_hosts
    vars: {level: node}
    containers:
      200: {hostname: llm, gpus: all}
  pve2:
    address: pve2.example.lan
    api:
      url: https://pve2.example.lan:8006/
      token_id: root@pam!gpuhost
      token_secret_env: PVE_TOKEN
groups:
  gpu: {nodes: [pve1, pve2], vars: {level: group, only_group: 1}}
"""


def test_valid_inventory_resolves_paths_and_merges_vars(tmp_path):
    inv = load_inventory(write(tmp_path, GOOD))
    assert list(inv.nodes) == ["pve1", "pve2"]
    pve1 = inv.nodes["pve1"]
    assert pve1.ssh.key_file == str(tmp_path / "keys/id")
    assert pve1.ssh.known_hosts_file == str(tmp_path / "known_hosts")
    assert pve1.ssh.host_key_policy == "strict"
    assert pve1.containers[200].hostname == "llm"
    assert inv.nodes["pve2"].api.url == "https://pve2.example.lan:8006"
    assert inv.vars_for("pve1") == {"driver": "580.95.05", "level": "node", "only_group": 1}
    assert inv.vars_for("pve2")["level"] == "group"


def test_select_by_group_node_and_all(tmp_path):
    inv = load_inventory(write(tmp_path, GOOD))
    assert inv.select("gpu") == ["pve1", "pve2"]
    assert inv.select("pve2") == ["pve2"]
    assert inv.select("all") == ["pve1", "pve2"]
    with pytest.raises(InventoryError, match="'nope' is neither a node nor a group"):
        inv.select("nope")


@pytest.mark.parametrize(
    ("text", "line", "field", "msg"),
    [
        ("nodes:\n  a:\n    address: 1.2.3.4\n    ssh:\n      prot: 22\n", 5, "nodes.a.ssh.prot", "unknown field"),
        (
            "nodes:\n  a:\n    address: 1.2.3.4\n    ssh:\n      port: 70000\n",
            5,
            "nodes.a.ssh.port",
            "less than or equal",
        ),
        ("nodes:\n  a:\n    adress: 1.2.3.4\n", 3, "nodes.a.adress", "unknown field"),
        (
            "nodes:\n  a:\n    address: 1.2.3.4\n    ssh: {host_key_policy: yolo}\n",
            4,
            "nodes.a.ssh.host_key_policy",
            "'strict' or 'accept-new'",
        ),
        (
            "nodes:\n  a:\n    address: 1.2.3.4\n    containers:\n      5: {}\n",
            4,
            "nodes.a.containers",
            "outside PVE's range",
        ),
        (
            "nodes:\n  a:\n    address: 1.2.3.4\ngroups:\n  g: {nodes: [a, b]}\n",
            5,
            "groups.g.nodes",
            "unknown node 'b'",
        ),
    ],
)
def test_bad_inventory_names_file_line_and_field(tmp_path, text, line, field, msg):
    path = write(tmp_path, text)
    with pytest.raises(InventoryError) as info:
        load_inventory(path)
    err = info.value
    assert err.exit_code == 2
    assert (err.file, err.line, err.field) == (str(path), line, field)
    assert msg in str(err)
    assert str(err).startswith(f"{path}:{line}: field '{field}'")


def test_yaml_syntax_error_names_line(tmp_path):
    path = write(tmp_path, "nodes:\n  a:\n    address: [1.2\n")
    with pytest.raises(InventoryError) as info:
        load_inventory(path)
    assert info.value.line is not None and info.value.line >= 3


def test_inline_secrets_are_refused(tmp_path):
    text = (
        "nodes:\n  a:\n    address: 1.2.3.4\n    api:\n      url: https://a:8006\n"
        "      token_id: root@pam!x\n      token_secret: 0123-abcd\n"
    )
    with pytest.raises(InventoryError) as info:
        load_inventory(write(tmp_path, text))
    assert "must not be written in the inventory" in str(info.value)
    assert "0123-abcd" not in str(info.value)
    assert info.value.line == 4


def test_secret_from_env_is_registered_for_redaction(monkeypatch):
    monkeypatch.setenv("GPUHOST_TEST_TOKEN", "s3cr3t-token-value")
    assert read_secret("api token", env="GPUHOST_TEST_TOKEN") == "s3cr3t-token-value"
    assert redact("auth s3cr3t-token-value here") == "auth ******** here"


def test_secret_file_must_be_private(tmp_path):
    f = tmp_path / "token"
    f.write_text("abcdefgh\n")
    os.chmod(f, 0o644)
    with pytest.raises(SecretError, match="chmod 600"):
        read_secret("api token", file=str(f))
    os.chmod(f, 0o600)
    assert read_secret("api token", file=str(f)) == "abcdefgh"


def test_missing_env_secret_is_a_clear_error():
    with pytest.raises(SecretError, match="GPUHOST_SURELY_UNSET is not set"):
        read_secret("api token", env="GPUHOST_SURELY_UNSET")


def test_shipped_example_inventory_is_valid():
    repo = Path(__file__).resolve().parents[3]
    inv = load_inventory(repo / "inventory" / "example.yml")
    node = inv.nodes["pve-gpu1"]
    assert node.containers[200].gpus == "all"
    assert inv.vars_for("pve-gpu1")["nvidia_driver"]["version"] == "580.95.05"


def test_api_fingerprint_is_a_sha256_and_excludes_ca_file():
    from pydantic import ValidationError

    from gpuhost.inventory.models import APIConfig

    fp = ":".join(["AB"] * 32)
    assert APIConfig(url="https://192.0.2.10:8006", fingerprint=fp).fingerprint == fp
    with pytest.raises(ValidationError, match="SHA-256 fingerprint"):
        APIConfig(url="https://192.0.2.10:8006", fingerprint="AB:CD")
    with pytest.raises(ValidationError, match="ca_file or fingerprint, not both"):
        APIConfig(url="https://192.0.2.10:8006", fingerprint=fp, ca_file="ca.pem")
