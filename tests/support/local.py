"""Build a HostContext on the controller itself, for unit tests of operations and the runner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuhost.connection.local import LocalConnection
from gpuhost.inventory.models import NodeSpec
from gpuhost.runner.context import RunnerHost
from gpuhost.templating import Templates


def local_host(
    name: str = "local",
    *,
    check: bool = False,
    variables: dict[str, Any] | None = None,
    template_dir: Path | None = None,
) -> RunnerHost:
    node = NodeSpec(name=name, address="127.0.0.1", connection="local")
    return RunnerHost(
        node,
        variables or {},
        Templates([template_dir] if template_dir else []),
        check=check,
        connect=lambda n: LocalConnection(n.name),
    )


def local_inventory(tmp_path: Path, names: list[str], variables: dict[str, Any] | None = None) -> Path:
    lines = ["nodes:"]
    for n in names:
        lines += [f"  {n}:", "    address: 127.0.0.1", "    connection: local"]
    if variables:
        import json

        lines.append(f"vars: {json.dumps(variables)}")
    path = tmp_path / "inventory.yml"
    path.write_text("\n".join(lines) + "\n")
    return path
