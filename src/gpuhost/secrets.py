"""Read a secret from the environment or a file, and register it for redaction."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gpuhost.errors import SecretError
from gpuhost.redact import register_secret


def read_secret(what: str, *, env: str | None = None, file: str | None = None) -> str | None:
    """The secret named by ``env`` or ``file`` (``None`` when neither is given).

    A file must not be readable by group or others, as ssh demands of private keys.
    """
    if env:
        value = os.environ.get(env)
        if value is None:
            raise SecretError(f"{what}: environment variable {env} is not set")
    elif file:
        path = Path(file).expanduser()
        try:
            mode = path.stat().st_mode
            if mode & (stat.S_IRWXG | stat.S_IRWXO):
                raise SecretError(
                    f"{what}: {path} is readable by others (mode {stat.S_IMODE(mode):o}); chmod 600 {path}"
                )
            value = path.read_text().strip()
        except OSError as exc:
            raise SecretError(f"{what}: cannot read {path}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise SecretError(f"{what}: {path} is not UTF-8 text") from None
    else:
        return None
    value = value.strip()
    if not value:
        raise SecretError(f"{what}: the secret is empty")
    bad = next((c for c in value if ord(c) < 0x20 or ord(c) == 0x7F), None)
    if bad is not None:
        # a newline in an API key would become a second line of the env file (another variable for SGLang)
        raise SecretError(
            f"{what}: the secret contains a control character ({'NUL' if bad == chr(0) else repr(bad)}); "
            "a secret is one line of printable text"
        )
    register_secret(value)
    return value
