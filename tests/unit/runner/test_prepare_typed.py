"""The roles get the node's guests as the inventory validated them: typed objects, not dicts rendered through
Jinja and validated a second time; and the names a role passes to its own templates come from the role."""

from __future__ import annotations

from pathlib import Path

from gpuhost.inventory.loader import load_inventory
from gpuhost.playbook.loader import load_playbook
from gpuhost.playbook.variables import Layer
from gpuhost.roles.table import ROLES
from gpuhost.runner.prepare import prepare
from gpuhost.templating import Templates

REPO = Path(__file__).resolve().parents[3]
PIN = "{version: 580.95.05, url: 'https://example.invalid/NVIDIA-Linux-x86_64-580.95.05.run', sha256: " + "a" * 64 + "}"


def test_the_lxc_role_gets_the_inventorys_own_container_objects(tmp_path: Path) -> None:
    inv_path = tmp_path / "inventory.yml"
    inv_path.write_text(
        f"vars: {{nvidia_driver: {PIN}}}\n"
        "nodes:\n  pve1:\n    address: 127.0.0.1\n    containers:\n      200: {hostname: llm, cores: 16}\n"
    )
    inv = load_inventory(inv_path)
    plays = prepare(
        load_playbook(REPO / "playbooks" / "provision-lxc.yml"),
        inv,
        limit=None,
        extra=Layer({}, {}),
        templates=Templates([REPO / "templates"]),
    )
    lxc = [rr for pp in plays for rr in pp.hosts["pve1"].roles if rr.role.name == "lxc_gpu"]
    assert lxc, "provision-lxc.yml runs the lxc_gpu role"
    assert lxc[0].vars.containers[200] is inv.nodes["pve1"].containers[200]  # type: ignore[attr-defined]


def test_each_role_names_the_variables_it_passes_to_its_templates() -> None:
    provided = {name: role.template_vars for name, role in ROLES.items() if role.template_vars}
    assert provided == {"proxmox_host": {"vfio_ids"}, "sglang": {"sglang"}, "smg_gateway": {"smg"}}
