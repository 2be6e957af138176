"""``gpuhost --version``: gpuhost's version and those of the pieces that talk to hosts.

Versions are read from installed package metadata; nothing is imported.
"""

from __future__ import annotations

import sys

from gpuhost import __version__

#: distributions whose versions a bug report needs
DEPENDENCIES = ("paramiko", "proxmoxer")


def version_text() -> str:
    from importlib.metadata import PackageNotFoundError, version

    lines = [f"gpuhost {__version__}", f"Python {sys.version.split()[0]}"]
    for dist in DEPENDENCIES:
        try:
            lines.append(f"{dist} {version(dist)}")
        except PackageNotFoundError:
            lines.append(f"{dist} not installed")
    return "\n".join(lines)
