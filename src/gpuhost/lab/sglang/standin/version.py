from ._lab.version import __version__

__all__ = ["__version__"]
