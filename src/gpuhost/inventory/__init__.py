"""Inventory: which hosts gpuhost manages and how to reach them."""

from gpuhost.inventory.loader import Inventory, load_inventory
from gpuhost.inventory.models import APIConfig, ContainerSpec, NodeSpec, SSHConfig, VMSpec
from gpuhost.inventory.secrets import read_secret

__all__ = ["APIConfig", "ContainerSpec", "Inventory", "NodeSpec", "SSHConfig", "VMSpec", "load_inventory",
           "read_secret"]
