"""Inventory: which hosts gpuhost manages and how to reach them (:mod:`~gpuhost.inventory.loader`,
:mod:`~gpuhost.inventory.models`)."""
