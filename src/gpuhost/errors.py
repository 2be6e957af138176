"""Every error gpuhost raises, in one place.

The hierarchy::

    GpuhostError                      base of everything below; ``exit_code`` says how the CLI exits
    ├── UsageError                    bad command-line input                              (exit 2)
    ├── ConfigError                   a file the user wrote is wrong: names file, line, field (exit 2)
    │   ├── InventoryError
    │   └── PlaybookError
    ├── SecretError                   a secret named in the inventory cannot be read       (exit 2)
    ├── TemplateError                 a template is missing, unsafe or fails to render   (exit 2)
    ├── ConnectionFailed              cannot reach or log in to a host                     (exit 1)
    │   └── HostKeyMismatch           the host presented a key we do not trust
    ├── CommandFailed                 a remote or local command exited non-zero            (exit 1)
    │   │                             carries command, exit code and the output's tail
    │   └── CommandTimeout            it ran past its timeout (exit 124)
    ├── FactError                     a host's state cannot be read or makes no sense      (exit 1)
    ├── OperationFailed               an operation cannot reach its desired state          (exit 1)
    ├── GpuConflict                    a change would take a device a running guest holds   (exit 2)
    └── ProbeError                    the GPU probe cannot run on a target                 (exit 2)

Messages never contain secrets: anything registered with :mod:`gpuhost.redact`
is masked when the message is built.
"""

from __future__ import annotations

from gpuhost.redact import redact

#: How many lines of output an error keeps.
TAIL_LINES = 20


def tail(text: str, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of ``text`` (without a trailing newline)."""
    parts = text.rstrip("\n").splitlines()
    return "\n".join(parts[-lines:])


class GpuhostError(Exception):
    """Base class. ``str(err)`` is a complete, redacted, user-facing message."""

    exit_code: int = 1

    def __init__(self, message: str) -> None:
        self.message = redact(message)
        super().__init__(self.message)


class UsageError(GpuhostError):
    exit_code = 2


class ConfigError(GpuhostError):
    """A user-written file (inventory, playbook) is invalid."""

    exit_code = 2

    def __init__(
        self, message: str, *, file: str | None = None, line: int | None = None, field: str | None = None
    ) -> None:
        self.file = file
        self.line = line
        self.field = field
        where = ""
        if file:
            where = file + (f":{line}" if line else "")
        prefix = ": ".join(p for p in (where, f"field '{field}'" if field else "") if p)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class InventoryError(ConfigError):
    pass


class PlaybookError(ConfigError):
    pass


class SecretError(GpuhostError):
    exit_code = 2


class TemplateError(GpuhostError):
    """A template is missing, refused by the sandbox, or fails to render: bad input (exit 2)."""

    exit_code = 2


class ConnectionFailed(GpuhostError):
    def __init__(self, host: str, reason: str) -> None:
        self.host = host
        self.reason = reason
        super().__init__(f"{host}: cannot connect: {reason}")


class HostKeyMismatch(ConnectionFailed):
    def __init__(self, host: str, reason: str) -> None:
        super().__init__(host, reason)


class CommandFailed(GpuhostError):
    """A command exited with a status other than the ones allowed."""

    def __init__(
        self, command: str, exit_code: int, stdout: str = "", stderr: str = "", host: str | None = None
    ) -> None:
        self.command = redact(command)
        self.exit_code_of_command = exit_code
        self.stdout_tail = redact(tail(stdout))
        self.stderr_tail = redact(tail(stderr))
        self.host = host
        where = f"{host}: " if host else ""
        lines = self.command.splitlines() or [""]
        shown = lines[0][:200] + (f" … (+{len(lines) - 1} lines)" if len(lines) > 1 else "")
        # the cause first: the last line the command wrote on stderr (else stdout), then the command
        said = [
            ln.strip()
            for ln in (self.stderr_tail or self.stdout_tail).splitlines()
            if ln.strip() and not ln.startswith("timed out after ")
        ]
        if said:
            msg = f"{where}command failed (exit {exit_code}): {said[-1]}\n  command: {shown}"
        else:
            msg = f"{where}command failed (exit {exit_code}): {shown}"
        out = "\n".join(t for t in (self.stdout_tail, self.stderr_tail) if t)
        if out:
            msg += "\n" + "\n".join("  | " + line for line in out.splitlines())
        super().__init__(msg)


class CommandTimeout(CommandFailed):
    """A command ran past its timeout; ``timeout`` is the limit in seconds."""

    def __init__(
        self, command: str, timeout: float, stdout: str = "", stderr: str = "", host: str | None = None
    ) -> None:
        self.timeout = timeout
        super().__init__(command, 124, stdout, stderr + f"\ntimed out after {timeout:g} s", host=host)
        self.message = self.message.replace("command failed (exit 124)", f"command timed out after {timeout:g} s", 1)
        self.args = (self.message,)

    def __str__(self) -> str:
        return self.message


class FactError(GpuhostError):
    pass


class OperationFailed(GpuhostError):
    pass


class ConfigChanged(OperationFailed):
    """The guest config changed between gpuhost's read and its write (PVE's digest check, or the
    locked re-read): the runner re-reads and re-plans once."""

    def __init__(self, path: str, planned: str, detail: str) -> None:
        self.path, self.planned, self.detail = path, planned, detail
        super().__init__(f"{path} changed since gpuhost read it ({detail})")


class GpuConflict(GpuhostError):
    """A change would take a device from a running guest that holds it (a CT's GPU bound to vfio-pci, a running
    VM's GPU given to another VM): refused before anything changed on the host (exit 2)."""

    exit_code = 2


class ProbeError(GpuhostError):
    exit_code = 2


class LabError(GpuhostError):
    """The lab (simulated Proxmox VE nodes) cannot start, stop or report."""

    exit_code = 2
