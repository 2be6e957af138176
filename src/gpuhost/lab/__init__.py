"""The lab: simulated Proxmox VE nodes reachable over real SSH and HTTPS on loopback addresses.

``gpuhost lab up`` starts them, ``gpuhost lab status`` lists them, ``gpuhost lab down`` stops them.
Product code never knows it talks to a lab: everything lab-specific lives in this package.

Host side: :mod:`manager` (up/down/status), :mod:`spec` (what to start), :mod:`layout` (the state
directory), :mod:`credentials`, :mod:`seed` (a node's first filesystem), :mod:`supervisor` (the
process that owns the nodes), :mod:`inventory`. Node side: :mod:`gpuhost.lab.node`, standard
library only, copied into every node.
"""
