"""The newcomer docs hold: README's inventory example loads as written, and the conventions table
names only tests that exist and has no gpuhost feature marked missing."""

from __future__ import annotations

import re
from pathlib import Path

from gpuhost.inventory.loader import load_inventory

REPO = Path(__file__).resolve().parents[2]


def test_readme_starts_with_the_two_commands():
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    assert blocks[:2] == ["bash scripts/main.sh\n", "bash scripts/test.sh\n"]


def test_readme_inventory_example_loads_as_written(tmp_path):
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Inventory") :]
    block = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    path = tmp_path / "inventory.yml"
    path.write_text(block)
    inv = load_inventory(path)
    assert inv.vars["nvidia_driver"]["version"] and inv.vars["gpu_path"] == "lxc"
    assert "inventory/example.yml" in text and "playbooks/example.yml" in text


def test_conventions_table_is_backed_by_tests():
    text = (REPO / "docs" / "conventions.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| feature")]
    assert len(rows) > 25
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        feature, ours, tests = cells[0], cells[1], cells[-1]
        assert ours.startswith(("yes", "0 ok")), f"{feature}: {ours}"
        for name in re.findall(r"`([^`]+\.py)", tests):
            found = list(REPO.glob(f"tests/**/{Path(name.split('::')[0]).name}"))
            assert found, f"{feature}: {name} does not exist"
