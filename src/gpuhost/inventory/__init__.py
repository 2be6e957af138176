"""Inventory: which hosts gpuhost manages and how to reach them."""

from gpuhost.inventory.loader import Inventory, load_inventory
from gpuhost.inventory.models import APIConfig, ContainerSpec, NodeSpec, SSHConfig

__all__ = ["APIConfig", "ContainerSpec", "Inventory", "NodeSpec", "SSHConfig", "load_inventory"]
