"""The one error handler of the command line.

Every :class:`~gpuhost.errors.GpuhostError` becomes ``error: message`` on stderr and its exit code;
anything else is a bug: one line ``internal error: …`` and :data:`INTERNAL_ERROR`, the traceback
only under ``--debug``.
"""

from __future__ import annotations

import sys
import traceback

from gpuhost.errors import GpuhostError
from gpuhost.redact import redact

#: exit status of a bug in gpuhost (sysexits' EX_SOFTWARE), apart from 1 (failed) and 2 (cannot run)
INTERNAL_ERROR = 70


def report(exc: BaseException, *, debug: bool = False) -> int:
    """Print ``exc`` for a human on stderr; returns the exit code."""
    if isinstance(exc, GpuhostError):
        if debug:
            traceback.print_exception(exc, file=sys.stderr)
        from gpuhost.cli.output import error

        error(str(exc))
        return exc.exit_code
    if debug:
        traceback.print_exception(exc, file=sys.stderr)
    text = " ".join(str(exc).split())
    message = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    hint = "" if debug else " (run with --debug for the traceback)"
    sys.stderr.write(redact(f"internal error: {message}{hint}") + "\n")
    return INTERNAL_ERROR
