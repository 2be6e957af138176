"""Proxmox VE file formats.

Everything in this package is standard-library only: the lab copies these modules into its
simulated nodes, which run Debian's python3 without gpuhost's dependencies.
"""
