"""Errors as PVE reports them: a message, the CLI exit code, the HTTP status, per-parameter errors."""

from __future__ import annotations


class PveError(Exception):
    def __init__(
        self, message: str, *, exit_code: int = 255, http_status: int = 500, errors: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.http_status = http_status
        self.errors = errors or {}

    def cli_text(self) -> str:
        """What PVE's CLI tools print on stderr."""
        if self.errors:
            lines = [f"{self.http_status} {self.message}"] + [f"{k}: {v}" for k, v in sorted(self.errors.items())]
            return "\n".join(lines) + "\n"
        return self.message.rstrip("\n") + "\n"


def param_error(errors: dict[str, str]) -> PveError:
    """PVE::Exception::raise_param_exc."""
    return PveError("Parameter verification failed.", exit_code=255, http_status=400, errors=errors)


def perm_error(what: str) -> PveError:
    """PVE::Exception::raise_perm_exc."""
    return PveError(f"Permission check failed ({what})", exit_code=255, http_status=403)


def not_in_schema(key: str) -> PveError:
    return param_error({key: "property is not defined in schema and the schema does not allow additional properties"})
