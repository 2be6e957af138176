"""SGLang (gpuhost lab stand-in): same entry points, flags, log lines and HTTP API, no GPUs needed."""

from ._lab.version import __version__

__all__ = ["__version__"]
