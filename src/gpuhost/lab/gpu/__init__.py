"""Simulated NVIDIA hardware for lab nodes (host side): what GPUs a node has, the ``.run``
installers the lab serves, the offline apt repository with Proxmox's packages, and the seed hook
that puts them into every node. The node side lives in :mod:`gpuhost.lab.node.nvidia`.
"""
