"""A simulated NVIDIA driver for lab nodes (standard library only, relocatable).

The same package runs in two places: on a lab node (``/usr/lib/gpuhost-lab/python``), where
:mod:`kernel` plays the kernel modules, and inside the ``.run`` installers the lab builds, which
copy it into the node or a container as the driver's userspace (``nvidia-smi``,
``nvidia-modprobe``, ``nvidia-persistenced``). Hence relative imports only.

Kernel state lives where Linux keeps it: ``/proc/driver/nvidia`` (a tmpfs over the node's
``/proc/driver``, bound into containers like procfs shows it to them), ``/proc/devices`` (a file
bound over it), ``/dev`` (the node's own tmpfs) and a per-boot list of loaded modules under
``/run``: all of it is gone after a reboot, like a kernel's.
"""
