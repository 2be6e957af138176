"""The P2P probe: runs on the GPU machine, measures, prints one JSON report.

This package is shipped to targets that have only the NVIDIA driver and python3.
It uses the standard library, ctypes on ``libcuda.so.1`` and NVML through the
``pynvml`` module of nvidia-ml-py, which is shipped beside it. It must never
import anything else from gpuhost or from third parties, and it keeps to syntax
that python3.8 understands, because LXC templates ship older interpreters.
"""

PROBE_VERSION = "1.0.0"

#: Bumped whenever a key of the JSON report changes meaning or moves.
SCHEMA_VERSION = 1
