"""serving.groups in the inventory: validated with file:line errors, resolved to replica URLs for the gateway."""

from pathlib import Path

import pytest

from gpuhost.errors import InventoryError
from gpuhost.inventory.loader import load_inventory, serving_vars

INV = """\
nodes:
  pve1:
    address: 10.0.0.1
    containers:
      200:
        serve: {profile: glm5-nvfp4-tp8-sm120, host: 10.0.0.11, port: 30000, api_key_file: key}
  pve2:
    address: 10.0.0.2
    containers:
      200:
        serve: {profile: glm5-nvfp4-tp8-sm120, host: 10.0.0.12, api_key_file: key}
      201: {hostname: idle}
serving:
  groups:
    glm5:
      replicas:
        - {node: pve1, ctid: 200}
        - {node: pve2, ctid: 200}
      gateway: {node: pve1, policy: round_robin, health: {interval_secs: 5}}
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "inv.yml"
    p.write_text(text)
    return p


def test_serving_group_resolves_replica_urls_and_the_gateway_address(tmp_path: Path) -> None:
    inv = load_inventory(write(tmp_path, INV))
    g = serving_vars(inv)["glm5"]
    assert [r["url"] for r in g["replicas"]] == ["http://10.0.0.11:30000", "http://10.0.0.12:30000"]
    assert g["replicas"][0]["api_key_file"] == str(tmp_path / "key")  # relative to the inventory
    gw = g["gateway"]
    assert gw["host"] == "10.0.0.1" and gw["port"] == 30080 and gw["version"] == "1.13.0"
    assert gw["health"]["interval_secs"] == 5 and gw["health"]["failure_threshold"] == 2


@pytest.mark.parametrize(
    ("old", "new", "message", "line"),
    [
        ("- {node: pve2, ctid: 200}", "- {node: pve3, ctid: 200}", "unknown node 'pve3'", 18),
        ("- {node: pve2, ctid: 200}", "- {node: pve2, ctid: 201}", "without a serve: entry 201", 18),
        ("- {node: pve2, ctid: 200}", "- {node: pve1, ctid: 200}", "listed twice", 18),
        ("gateway: {node: pve1", "gateway: {node: pve9", "unknown node 'pve9'", 19),
        ("host: 10.0.0.12,", "host: 0.0.0.0,", "the gateway cannot reach CT 200 on pve2", 18),
        ("host: 10.0.0.12, api_key_file: key", "host: 10.0.0.12, api_key_env: K", "another API key source", 18),
        ("policy: round_robin", "policy: fastest", "Input should be", 19),
        ("health: {interval_secs: 5}", "health: {interval_secs: 0}", "greater than or equal to 1", 19),
        # smg sends its own key to every replica (smg 1.13.0 on loopback): another key would get 401 on every request
        ("policy: round_robin,", "policy: round_robin, api_key_env: GW_KEY,", "would get 401", 19),
    ],
)
def test_bad_serving_entries_name_file_and_line(tmp_path: Path, old: str, new: str, message: str, line: int) -> None:
    with pytest.raises(InventoryError) as err:
        load_inventory(write(tmp_path, INV.replace(old, new)))
    assert message in str(err.value)
    assert err.value.line == line, str(err.value)


def test_two_gateways_on_a_node_may_not_share_a_prometheus_port(tmp_path: Path) -> None:
    # smg binds its metrics port even when none is named; a second bind fails "failed to bind metrics server"
    second = INV + "    other:\n      replicas: [{node: pve2, ctid: 200}]\n      gateway: {node: pve1, port: 30090}\n"
    with pytest.raises(InventoryError) as err:
        load_inventory(write(tmp_path, second))
    assert "Prometheus port 29000 on pve1" in str(err.value) and err.value.line == 22, str(err.value)
    apart = second.replace(
        "gateway: {node: pve1, port: 30090}", "gateway: {node: pve1, port: 30090, prometheus_port: null}"
    )
    assert serving_vars(load_inventory(write(tmp_path, apart)))["other"]["gateway"]["prometheus_port"] is None


def test_a_gateway_named_the_replicas_key_source_is_accepted(tmp_path: Path) -> None:
    same = INV.replace("policy: round_robin,", "policy: round_robin, api_key_file: key,")
    assert serving_vars(load_inventory(write(tmp_path, same)))["glm5"]["gateway"]["api_key_file"] == str(
        tmp_path / "key"
    )


def test_an_unreachable_replica_may_name_its_url(tmp_path: Path) -> None:
    text = INV.replace("host: 10.0.0.12,", "host: 0.0.0.0,").replace(
        "- {node: pve2, ctid: 200}", "- {node: pve2, ctid: 200, url: 'http://10.0.0.12:30000'}"
    )
    g = serving_vars(load_inventory(write(tmp_path, text)))["glm5"]
    assert g["replicas"][1]["url"] == "http://10.0.0.12:30000"


MULTI = """\
nodes:
  pve1:
    address: 10.0.0.1
    containers:
      200:
        serve: {profile: glm5-tp16-2node, host: 10.0.0.11, api_key_file: key}
  pve2:
    address: 10.0.0.2
    containers:
      200:
        serve: {profile: glm5-tp16-2node, host: 10.0.0.12, api_key_file: key}
      201:
        serve: {profile: glm5-nvfp4-tp8-sm120, host: 10.0.0.13, api_key_file: key}
serving:
  groups:
    big:
      replicas:
        - members:
            - {node: pve1, ctid: 200}
            - {node: pve2, ctid: 200}
"""


def test_a_multi_node_replica_resolves_its_members_in_rank_order_and_needs_no_gateway(tmp_path: Path) -> None:
    g = serving_vars(load_inventory(write(tmp_path, MULTI)))["big"]
    assert g["gateway"] is None
    (rep,) = g["replicas"]
    assert (rep["node"], rep["ctid"], rep["url"]) == ("pve1", 200, "http://10.0.0.11:30000")  # rank 0 serves the API
    assert [(m["node"], m["ctid"]) for m in rep["members"]] == [("pve1", 200), ("pve2", 200)]
    assert rep["dist_init_host"] == "10.0.0.11" and rep["members"][1]["serve"]["host"] == "10.0.0.12"
    named = MULTI.replace("        - members:", "        - dist_init_host: 10.9.9.1\n          members:")
    assert serving_vars(load_inventory(write(tmp_path, named)))["big"]["replicas"][0]["dist_init_host"] == "10.9.9.1"


@pytest.mark.parametrize(
    ("old", "new", "message", "line", "field"),
    [
        ("- {node: pve2, ctid: 200}", "- {node: pve3, ctid: 200}", "unknown node 'pve3'", 20, "members.1.node"),
        ("- {node: pve2, ctid: 200}", "- {node: pve2, ctid: 202}", "has no container 202", 20, "members.1.ctid"),
        ("- {node: pve2, ctid: 200}", "- {node: pve1, ctid: 200}", "listed twice", 20, "members.1"),
        (
            "- {node: pve2, ctid: 200}",
            "- {node: pve2, ctid: 201}",
            "serves profile glm5-nvfp4-tp8-sm120, rank 0 serves glm5-tp16-2node",
            20,
            "members.1.ctid",
        ),
        ("            - {node: pve2, ctid: 200}\n", "", "at least 2 items", 18, "members"),
        ("        - members:", "        - node: pve1\n          members:", "not both", 18, None),
        ("host: 10.0.0.11,", "host: 0.0.0.0,", "cannot reach rank 0 (CT 200 on pve1)", 18, None),
        ("        - members:", "        - dist_init_host: 'a b'\n          members:", "neither an IP", 18, None),
        (
            "            - {node: pve2, ctid: 200}\n",
            "            - {node: pve2, ctid: 200}\n    other:\n      replicas: [{node: pve2, ctid: 200}]\n",
            "is a member of the multi-node replica serving.groups.big.replicas.0 (rank 1)",
            22,
            None,
        ),
    ],
)
def test_bad_multi_node_replicas_name_file_line_and_field(
    tmp_path: Path, old: str, new: str, message: str, line: int, field: str | None
) -> None:
    with pytest.raises(InventoryError) as err:
        load_inventory(write(tmp_path, MULTI.replace(old, new)))
    assert message in str(err.value)
    assert err.value.line == line, str(err.value)
    if field:
        assert err.value.field == f"serving.groups.big.replicas.0.{field}", str(err.value)
