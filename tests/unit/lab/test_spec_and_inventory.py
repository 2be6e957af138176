from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from gpuhost.errors import UsageError
from gpuhost.lab.inventory import render_inventory
from gpuhost.lab.layout import LabLayout
from gpuhost.lab.spec import LabSpec, plan_nodes, require_loopback


def test_plan_nodes_uses_consecutive_loopback_addresses() -> None:
    nodes = plan_nodes(3, base_address="127.77.0.254", boot="grub", cpu="intel", pve=9)
    assert [(n.name, n.address) for n in nodes] == [
        ("pve1", "127.77.0.254"),
        ("pve2", "127.77.0.255"),
        ("pve3", "127.77.1.0"),
    ]
    assert {(n.boot, n.cpu, n.pve) for n in nodes} == {("grub", "intel", 9)}


@pytest.mark.parametrize("address", ["10.0.0.1", "192.168.1.10", "::1", "pve1"])
def test_only_ipv4_loopback_is_accepted(address: str) -> None:
    with pytest.raises(UsageError):
        require_loopback(address)


def test_addresses_may_not_run_off_loopback() -> None:
    with pytest.raises(UsageError, match="127.0.0.0/8"):
        plan_nodes(3, base_address="127.255.255.254")


@pytest.mark.parametrize(
    "kwargs", [{"count": 0}, {"count": 1, "boot": "lilo"}, {"count": 1, "cpu": "arm"}, {"count": 1, "pve": 7}]
)
def test_bad_choices_are_usage_errors(kwargs: dict[str, object]) -> None:
    count = kwargs.pop("count")
    with pytest.raises(UsageError):
        plan_nodes(count, **kwargs)  # type: ignore[arg-type]


def test_spec_round_trips_through_json(tmp_path: Path) -> None:
    spec = LabSpec(nodes=plan_nodes(2, base_address="127.77.5.1"), seed_dirs=["/seed"])
    (tmp_path / "lab.json").write_text(spec.to_json())
    assert LabSpec.from_file(tmp_path / "lab.json") == spec


def test_inventory_has_the_gpuhost_schema_with_relative_paths(tmp_path: Path) -> None:
    layout = LabLayout(tmp_path)
    spec = LabSpec(nodes=plan_nodes(2, base_address="127.77.5.1", boot="grub"))
    inv = YAML(typ="safe").load(render_inventory(layout, spec))
    assert inv["vars"] == {}
    assert inv["groups"] == {"lab": {"nodes": ["pve1", "pve2"], "vars": {}}}
    node = inv["nodes"]["pve2"]
    assert {k: v for k, v in node["vars"].items() if k in ("lab", "lab_boot", "lab_cpu", "lab_pve")} == {
        "lab": True,
        "lab_boot": "grub",
        "lab_cpu": "amd",
        "lab_pve": 8,
    }
    del node["vars"]
    assert node == {
        "address": "127.77.5.2",
        "ssh": {
            "user": "root",
            "port": 22,
            "key_file": "client_key",
            "known_hosts_file": "known_hosts",
            "host_key_policy": "strict",
        },
        "api": {
            "url": "https://127.77.5.2:8006",
            "token_id": "root@pam!gpuhost",
            "token_secret_file": "pve2.token",
            "ca_file": "lab-ca.pem",
        },
    }
