"""The ``KEY=value`` lines of an env file, for the shipped programs: stdlib only, Python 3.8.

A shipped program imports it in one line, ``from gpuhost.tools.envfile import env_lines``;
:func:`gpuhost.resources.read_tool` puts this file's code in place of that line, so the program still
travels as one file.
"""

from __future__ import annotations

from collections.abc import Iterator


def env_lines(env_file: str | None) -> Iterator[tuple[str, str]]:
    """Each line of ``env_file`` that has an ``=``, stripped and split at the first one, as it is read; nothing
    when no file is named or it cannot be read (reading stops there)."""
    if not env_file:
        return
    try:
        with open(env_file) as fh:
            for line in fh:
                key, sep, value = line.strip().partition("=")
                if sep:
                    yield key, value
    except OSError:
        return
