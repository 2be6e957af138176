"""The lab: simulated Proxmox VE nodes reachable over real SSH and HTTPS on loopback addresses.

``gpuhost lab up`` starts them, ``gpuhost lab status`` lists them, ``gpuhost lab down`` stops them.
Product code never knows it talks to a lab: everything lab-specific lives in this package.

How a node is made
------------------
* One detached supervisor (:mod:`supervisor`) owns every node of a lab. Each node is an
  ``unshare -m -u -p`` whose child is the node's PID 1 (:mod:`gpuhost.lab.node.init`); PR_SET_PDEATHSIG
  on unshare ties the nodes to the supervisor, so nothing outlives it.
* A node's root is an overlay: the host's own Debian below, the node's persistent upper layer
  (``<state>/nodes/<name>/upper``, on disk) above. :mod:`seed` writes PVE's files into the upper
  layer before the first boot; :mod:`boot_script` mounts private /proc, /dev, /run, /tmp and
  pivots into it.
* Every boot, the supervisor (:mod:`nodeproc`) decides what the kernel would see: /proc/cmdline from
  the bootloader state in the upper layer (:mod:`gpuhost.lab.node.bootloader`: GRUB's generated
  grub.cfg, or the ESP entry of the last ``proxmox-boot-tool refresh``), a fresh boot_id, the
  chosen CPU vendor in /proc/cpuinfo (:mod:`cpuinfo`) and a kernel log (:mod:`kernel_log`).
  ``reboot`` inside a node asks the supervisor, over a per-node socket, to do exactly that again.
* Inside the node, shims answer like PVE's tools (``qm``, ``pct``, ``pvesh``, ``pveversion``,
  ``proxmox-boot-tool``, ``update-grub``, ``update-initramfs``, ``reboot``, ``systemctl``), and
  ``pveproxy`` serves the HTTPS API on port 8006; all share :mod:`gpuhost.lab.node` and read the
  node's description, /var/lib/gpuhost-lab/node.json (:class:`gpuhost.lab.node.state.NodeState`).

Extension points
----------------
* ``NodeState.extra``: room for more per-node facts (e.g. simulated GPUs).
* :data:`gpuhost.lab.seed.SeedHook`: callables given to :func:`manager.up` write more seed files.
* :func:`kernel_log.render` takes ``extra`` lines; /sys/bus/pci/devices is read through
  :mod:`gpuhost.lab.node.pci`, so a node-private sysfs overlay is enough to add devices.

Host side: :mod:`manager` (up/down/status), :mod:`spec` (what to start), :mod:`layout` (the state
directory), :mod:`credentials`, :mod:`seed`, :mod:`supervisor`, :mod:`inventory`. Node side:
:mod:`gpuhost.lab.node`, standard library only, installed once per lab and bind-mounted read-only
into every node.
"""
