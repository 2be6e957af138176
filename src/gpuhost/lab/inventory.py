"""The inventory a lab writes for its nodes, in gpuhost's inventory schema."""

from __future__ import annotations

import json

from gpuhost.lab.layout import LabLayout
from gpuhost.lab.spec import LabSpec

HEADER = "# written by `gpuhost lab up` — do not edit\n"


def _q(value: str) -> str:
    """A YAML scalar (JSON strings are valid YAML)."""
    return json.dumps(value)


def render_inventory(layout: LabLayout, spec: LabSpec) -> str:
    """Paths are relative to the inventory file's directory (the lab state directory)."""
    from gpuhost.lab.gpu.inventory import node_vars, node_yaml, vars_yaml
    out = [HEADER, vars_yaml(layout.root), "nodes:\n"]
    for node in spec.nodes:
        out += [
            f"  {node.name}:\n",
            f"    address: {node.address}\n",
            "    ssh:\n",
            "      user: root\n",
            "      port: 22\n",
            f"      key_file: {layout.client_key.name}\n",
            f"      known_hosts_file: {layout.known_hosts.name}\n",
            "      host_key_policy: strict\n",
            "    api:\n",
            f"      url: https://{node.address}:8006\n",
            f"      token_id: {_q(spec.token_id)}\n",
            f"      token_secret_file: {layout.token_file(node.name).name}\n",
            f"      ca_file: {layout.ca_cert.name}\n",
            f"    vars: {{lab: true, lab_boot: {node.boot}, lab_cpu: {node.cpu}, lab_pve: {node.pve}, "
            f"lab_gpus: {node.gpus}{node_vars(node)}}}\n",
            node_yaml(node),
        ]
    names = ", ".join(n.name for n in spec.nodes)
    out += ["groups:\n", f"  lab: {{nodes: [{names}], vars: {{}}}}\n"]
    return "".join(out)
