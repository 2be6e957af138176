"""Inventory: which hosts gpuhost manages and how to reach them.

The names below load on first use (PEP 562), so importing this package does not pull in pydantic.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuhost.inventory.loader import Inventory, load_inventory
    from gpuhost.inventory.models import APIConfig, ContainerSpec, NodeSpec, SSHConfig, VMSpec
    from gpuhost.inventory.secrets import read_secret

_LAZY = {"Inventory": "gpuhost.inventory.loader", "load_inventory": "gpuhost.inventory.loader",
         "APIConfig": "gpuhost.inventory.models", "ContainerSpec": "gpuhost.inventory.models",
         "NodeSpec": "gpuhost.inventory.models", "SSHConfig": "gpuhost.inventory.models",
         "VMSpec": "gpuhost.inventory.models", "read_secret": "gpuhost.inventory.secrets"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = ["APIConfig", "ContainerSpec", "Inventory", "NodeSpec", "SSHConfig", "VMSpec", "load_inventory",
           "read_secret"]
