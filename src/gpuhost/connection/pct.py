"""Run inside an LXC container through its node: ``pct exec CTID -- sh -c …`` over the node's connection.

Commands, reads and small writes pass through ``pct exec`` (stdin included). Files go with
``pct push`` / ``pct pull``, as PVE's own tools do:

* ``put_file``: the content goes to a temporary directory on the node (verified there), ``pct push``
  copies it to a temporary name beside the target inside the CT (mode 0600), where its length and
  SHA-256 are verified again before it gets its final owner and mode and is renamed over the
  target (the same script as every other write, see :mod:`gpuhost.connection.write_script`);
* ``get_file``: the CT's SHA-256 of the file is read, ``pct pull`` copies it to the node, and the
  node's copy (checked against it) comes back.

Temporary files on the node and in the CT are removed whatever happens.
"""

from __future__ import annotations

import os
import posixpath
import shlex
import tempfile
from pathlib import Path
from typing import BinaryIO

from gpuhost.connection.base import Connection, Stdin, WriteResult
from gpuhost.connection.payload import Payload, check_sha256
from gpuhost.connection.write_script import TEMP_NAME_SCRIPT, SymlinkPolicy, WriteRequest
from gpuhost.core.result import CommandResult
from gpuhost.errors import CommandFailed

#: sha256 and size of a node file (exit 44: none)
_SOURCE_SCRIPT = (
    r'p=$1; [ -f "$p" ] || exit 44; s=$(sha256sum < "$p") || exit 1; '
    r'printf "%s %s\n" "${s%% *}" "$(stat -L -c %s -- "$p")"'
)


def pct_command(ctid: int, command: str) -> str:
    """What the node runs for ``command`` inside container ``ctid``."""
    return f"pct exec {ctid} -- sh -c {shlex.quote(command)}"


class PctConnection(Connection):
    """Commands, reads and atomic writes inside container ``ctid``; stdin passes through."""

    def __init__(self, node: Connection, ctid: int) -> None:
        self.node = node
        self.ctid = int(ctid)
        self.name = f"{node.name}/ct{self.ctid}"
        self.default_timeout = node.default_timeout

    def _exec(
        self, command: str, stdin: Stdin, timeout: float | None, stdout_sink: BinaryIO | None = None
    ) -> CommandResult:
        result = self.node._exec(pct_command(self.ctid, command), stdin, timeout, stdout_sink)
        return CommandResult(
            command, result.exit_code, result.stdout, result.stderr, result.duration, timed_out=result.timed_out
        )

    def _upload(self, payload: Payload, request: WriteRequest, timeout: float | None) -> WriteResult:
        """Staged on the node, then ``pct push``-ed into the container (checked there before the rename)."""
        staging = self._node_temp_dir()
        try:
            self.node.put_file(f"{staging}/data", payload.stream, mode=0o600, sha256=payload.sha256, timeout=timeout)
            return self._push(f"{staging}/data", request, timeout)
        finally:
            self.node.run(["rm", "-rf", "--", staging], check=False)

    def push_from_node(
        self,
        node_path: str,
        remote_path: str,
        *,
        sha256: str,
        mode: int | None = None,
        symlinks: SymlinkPolicy = "follow",
        timeout: float | None = None,
    ) -> WriteResult:
        """Copy the node's file ``node_path`` into the CT at ``remote_path`` without it passing through the
        controller: the node's file must have ``sha256`` (else nothing is sent), ``pct push`` copies it to a
        temporary name beside the target, where its length and SHA-256 are checked before it is renamed over
        the target (its directory is created if need be). A target that already has ``sha256`` is not sent
        again (only its mode corrected)."""
        want = check_sha256(sha256)
        there = self.already_there(remote_path, want, mode, 0)
        if there is not None:
            return there
        size = self.node.run(["sh", "-c", _SOURCE_SCRIPT, "gpuhost-stat", node_path], ok_codes=(0, 44))
        parts = size.stdout.split()
        if size.exit_code == 44 or len(parts) != 2:
            raise CommandFailed(
                f"pct push {self.ctid} {node_path}", 44, "", f"{node_path}: no such file on the node", host=self.name
            )
        if parts[0] != want:
            raise CommandFailed(
                f"pct push {self.ctid} {node_path}",
                1,
                "",
                f"checksum mismatch: {node_path} on the node has {parts[0]}, want {want}: not pushed",
                host=self.name,
            )
        request = WriteRequest(remote_path, int(parts[1]), want, mode, False, None, None, symlinks)
        self.run(["mkdir", "-p", "--", posixpath.dirname(remote_path) or "/"])
        return self._push(node_path, request, timeout)

    def _push(self, node_path: str, request: WriteRequest, timeout: float | None) -> WriteResult:
        """``pct push`` of the node's ``node_path`` to a temporary name in the CT, verified and renamed."""
        ct_temp: str | None = None
        try:
            ct_temp = self.run(
                ["sh", "-c", TEMP_NAME_SCRIPT, "gpuhost-temp", request.path, request.symlinks]
            ).stdout.strip()
            self.node.run(["pct", "push", str(self.ctid), node_path, ct_temp, "--perms", "0600"], timeout=timeout)
            result = self.run(f"PUSHED={shlex.quote(ct_temp)} {request.command()}", timeout=timeout)
            ct_temp = None  # renamed into place (the script removes it itself on failure)
            return WriteResult(request.path, result.stdout.strip() or None, request.sha256, request.size)
        finally:
            if ct_temp:
                self.run(["rm", "-f", "--", ct_temp], check=False)

    def get_file(
        self, remote_path: str, local_path: str | os.PathLike[str] | None = None, *, timeout: float | None = None
    ) -> bytes | Path:
        current = self.remote_sha256(remote_path)
        if current is None:
            raise CommandFailed(
                f"pct pull {self.ctid} {remote_path}", 44, "", f"{remote_path}: no such file", host=self.name
            )
        staging = self._node_temp_dir()
        try:
            pulled = f"{staging}/data"
            self.node.run(["pct", "pull", str(self.ctid), remote_path, pulled], timeout=timeout)
            on_node = self.node.remote_sha256(pulled)
            if on_node is None or on_node[0] != current[0]:
                raise CommandFailed(
                    f"pct pull {self.ctid} {remote_path}",
                    1,
                    "",
                    f"checksum mismatch: {remote_path} has {current[0]} in the CT, the copy "
                    f"pulled to the node has {on_node[0] if on_node else 'nothing'}",
                    host=self.name,
                )
            if local_path is None:
                return self.node.get_file(pulled, timeout=timeout)
            target = Path(local_path)
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.gpuhost-", dir=target.parent)
            os.close(fd)
            try:
                self.node.get_file(pulled, tmp, timeout=timeout)
                os.replace(tmp, target)
            finally:
                Path(tmp).unlink(missing_ok=True)
            return target
        finally:
            self.node.run(["rm", "-rf", "--", staging], check=False)

    def _node_temp_dir(self) -> str:
        return self.node.run('mktemp -d "${TMPDIR:-/tmp}/gpuhost-pct.XXXXXX"').stdout.strip()
