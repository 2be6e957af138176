"""The inventory a lab writes for its nodes: plain YAML data in the layout gpuhost's inventory documents.

The lab does not build it with gpuhost's own inventory models (the lab must not run the product's code for what it
tests); the tests that load the written file with gpuhost's inventory loader check that it is a valid inventory.
"""

from __future__ import annotations

import io
from typing import Any

from ruamel.yaml import YAML

from gpuhost.lab.gpu.inventory import containers, lab_vars, node_vars, vms
from gpuhost.lab.layout import LabLayout
from gpuhost.lab.spec import LabSpec
from gpuhost.lab.spec import NodeSpec as LabNode

HEADER = "# written by `gpuhost lab up` — do not edit\n"


def _node(layout: LabLayout, spec: LabSpec, node: LabNode) -> dict[str, Any]:
    guests = containers(node)
    ssh: dict[str, Any] = {
        "user": "root",
        "port": 22,
        "key_file": layout.client_key.name,
        "known_hosts_file": layout.known_hosts.name,
        "host_key_policy": "strict",
    }
    gpu_vms = vms(node, ssh)
    out: dict[str, Any] = {
        "address": node.address,
        "ssh": ssh,
        "api": {
            "url": f"https://{node.address}:8006",
            "token_id": spec.token_id,
            "token_secret_file": layout.token_file(node.name).name,
            "ca_file": layout.ca_cert.name,
        },
        "vars": {
            "lab": True,
            "lab_boot": node.boot,
            "lab_cpu": node.cpu,
            "lab_pve": node.pve,
            "lab_gpus": node.gpus,
            **node_vars(node),
        },
    }
    if guests:
        out["containers"] = guests
    if gpu_vms:
        out["vms"] = gpu_vms
    return out


def inventory_data(layout: LabLayout, spec: LabSpec) -> dict[str, Any]:
    """The lab's inventory; paths are relative to the inventory file's directory (the lab state directory)."""
    return {
        "vars": lab_vars(layout.root),
        "nodes": {node.name: _node(layout, spec, node) for node in spec.pve_nodes()},
        "groups": {"lab": {"nodes": [n.name for n in spec.pve_nodes()], "vars": {}}},
    }


def render_inventory(layout: LabLayout, spec: LabSpec) -> str:
    """The inventory file's text, keys in the order gpuhost's inventory documents them."""
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.width = 4096
    yaml.representer.sort_base_mapping_type_on_output = False
    out = io.StringIO()
    yaml.dump(inventory_data(layout, spec), out)
    return HEADER + out.getvalue()
