"""One guest kind: the runner's guests and PVE's config files name the two kinds alike (PVE's words)."""

from typing import get_args

from gpuhost.core import guest
from gpuhost.pve import config


def test_the_config_parser_and_the_runner_share_the_guest_kinds() -> None:
    assert set(get_args(config.GuestKind)) == set(get_args(guest.GuestKind)) == {"lxc", "qemu"}


def test_the_config_module_imports_nothing_of_gpuhost() -> None:
    # the lab copies pve/config.py alone into its nodes (Debian's python3, no gpuhost): an import of
    # gpuhost.core there broke every simulated pct
    import ast
    from pathlib import Path

    tree = ast.parse(Path(config.__file__).read_text())
    imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [m for m in imported if m.startswith("gpuhost")]
