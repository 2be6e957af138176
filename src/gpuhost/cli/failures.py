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


def report(exc: BaseException, *, debug: bool = False, as_json: bool = False) -> int:
    """Print ``exc`` for a human on stderr (and, with ``as_json``, as one JSON object on stdout, so a program
    reading ``--json`` output always gets an object); returns the exit code."""
    if isinstance(exc, GpuhostError):
        if debug:
            traceback.print_exception(exc, file=sys.stderr)
        from gpuhost.cli.output import error

        error(str(exc))
        if as_json:
            _json_error(exc.exit_code, str(exc), type(exc).__name__)
        return exc.exit_code
    environment = _environment(exc)
    if environment is not None:
        code, said = environment
        if debug:
            traceback.print_exception(exc, file=sys.stderr)
        from gpuhost.cli.output import error

        error(said)
        if as_json:
            _json_error(code, said, type(exc).__name__)
        return code
    if debug:
        traceback.print_exception(exc, file=sys.stderr)
    text = " ".join(str(exc).split())
    message = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    hint = "" if debug else " (run with --debug for the traceback)"
    sys.stderr.write(redact(f"internal error: {message}{hint}") + "\n")
    if as_json:
        _json_error(INTERNAL_ERROR, f"internal error: {message}", "internal")
    return INTERNAL_ERROR


def _names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def _environment(exc: BaseException) -> tuple[int, str] | None:
    """(exit code, message with cause and fix) of a failure of the world around gpuhost, not of gpuhost: a TLS
    failure, an API that cannot be reached, a path that cannot be written. None for anything else (a bug)."""
    text = " ".join(str(exc).split())[:400]
    names = _names(exc)
    if "SSLError" in names or "SSLCertVerificationError" in names:
        return 1, (
            f"TLS failure talking to the PVE API: {text}. Fix: set api.ca_file to the cluster's CA "
            "(copy /etc/pve/pve-root-ca.pem from a node) or pin the certificate's fingerprint"
        )
    if names & {"ConnectionError", "Timeout", "ConnectTimeout", "ReadTimeout"} and "RequestException" in names:
        return 1, (
            f"cannot reach the PVE API: {text}. Fix: check api.url (https://NODE:8006) and that pveproxy runs on the "
            "node (systemctl status pveproxy)"
        )
    if isinstance(exc, (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError)) and exc.filename:
        return 2, f"cannot use {exc.filename}: {exc.strerror}. Fix: give a path in a folder that exists and is writable"
    if isinstance(exc, OSError) and "RequestException" not in names:
        return 1, f"{exc.strerror or text}" + (f": {exc.filename}" if exc.filename else "")
    return None


#: the object ``--json`` prints on stdout when the command could not produce its own
ERROR_SCHEMA = "gpuhost.error/1"


def _json_error(code: int, message: str, kind: str) -> None:
    from gpuhost.cli.output import print_json

    print_json({"schema": ERROR_SCHEMA, "ok": False, "exit_code": code, "error": message, "kind": kind})
