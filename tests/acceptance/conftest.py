"""``pytest --gpuhost-inventory INV tests/acceptance``: the suite shipped in gpuhost.acceptance.suite.

The tests live in the package (``gpuhost verify`` runs them from an installed gpuhost); these modules
only import them. The plugin comes from gpuhost's ``pytest11`` entry point (or ``-p gpuhost.acceptance.plugin``).
A run of the whole tree that names neither this directory nor an inventory leaves it out.
"""

from pathlib import Path

import pytest


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    here = Path(__file__).parent
    if collection_path.parent != here or config.getoption("gpuhost_inventory", None):
        return None
    named = any(Path(a.split("::")[0]).resolve().is_relative_to(here) for a in config.args)
    return None if named else True
