"""What running a command on a target returns."""

from __future__ import annotations

from dataclasses import dataclass

#: Exit status reported for a command that ran past its timeout (as coreutils' ``timeout``).
TIMEOUT_EXIT = 124

#: a read answered over a kept connection (:mod:`gpuhost.connection.persist`): exit status, output, error output;
#: None when it could not be answered (the run then reads over its own connection)
KeptAnswer = tuple[int, bytes, str] | None


@dataclass(frozen=True)
class CommandResult:
    """The outcome of one command on one host."""

    command: str
    exit_code: int
    stdout: str
    stderr: str
    duration: float = 0.0
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0
