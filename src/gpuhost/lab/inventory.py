"""The inventory a lab writes for its nodes: gpuhost's own inventory models, dumped as YAML."""

from __future__ import annotations

import io

from ruamel.yaml import YAML

from gpuhost.inventory.models import APIConfig, GroupSpec, InventoryFile, NodeSpec, SSHConfig
from gpuhost.lab.gpu.inventory import containers, lab_vars, node_vars, vms
from gpuhost.lab.layout import LabLayout
from gpuhost.lab.spec import LabSpec
from gpuhost.lab.spec import NodeSpec as LabNode

HEADER = "# written by `gpuhost lab up` — do not edit\n"


def _node(layout: LabLayout, spec: LabSpec, node: LabNode) -> NodeSpec:
    guests = containers(node)
    ssh = SSHConfig(
        user="root",
        port=22,
        key_file=layout.client_key.name,
        known_hosts_file=layout.known_hosts.name,
        host_key_policy="strict",
    )
    gpu_vms = vms(node, ssh)
    return NodeSpec(
        address=node.address,
        ssh=ssh,
        api=APIConfig(
            url=f"https://{node.address}:8006",
            token_id=spec.token_id,
            token_secret_file=layout.token_file(node.name).name,
            ca_file=layout.ca_cert.name,
        ),
        vars={
            "lab": True,
            "lab_boot": node.boot,
            "lab_cpu": node.cpu,
            "lab_pve": node.pve,
            "lab_gpus": node.gpus,
            **node_vars(node),
        },
        **({"containers": guests} if guests else {}),
        **({"vms": gpu_vms} if gpu_vms else {}),
    )


def inventory_model(layout: LabLayout, spec: LabSpec) -> InventoryFile:
    """The lab's inventory; paths are relative to the inventory file's directory (the lab state directory)."""
    return InventoryFile(
        vars=lab_vars(layout.root),
        nodes={node.name: _node(layout, spec, node) for node in spec.pve_nodes()},
        groups={"lab": GroupSpec(nodes=[n.name for n in spec.pve_nodes()], vars={})},
    )


def render_inventory(layout: LabLayout, spec: LabSpec) -> str:
    """The inventory file's text: what the models hold, only the fields the lab set."""
    doc = inventory_model(layout, spec).model_dump(mode="python", exclude_unset=True)
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.width = 4096
    yaml.representer.sort_base_mapping_type_on_output = False  # the models' field order, as gpuhost documents it
    out = io.StringIO()
    yaml.dump(doc, out)
    return HEADER + out.getvalue()
