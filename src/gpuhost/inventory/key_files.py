"""The SSH private keys an inventory names, checked before any connection (issue 31).

A key that does not exist, cannot be read, or that others can read is bad input in the inventory: exit 2 with
the inventory's file, line and field, before gpuhost connects anywhere. OpenSSH refuses such a key too:
``sshkey_perm_ok()`` in openssh-portable ``authfile.c`` ("Permissions 0644 for '…' are too open. It is required
that your private key files are NOT accessible by others."), which it checks when the key is owned by the user
running ssh; gpuhost refuses a key any other user can read, whoever owns it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from gpuhost import yamlfile
from gpuhost.errors import InventoryError
from gpuhost.inventory.loader import Inventory


def key_problem(path: str) -> str | None:
    """Why the private key at ``path`` cannot be used (None: it can)."""
    full = Path(path).expanduser()
    try:
        st = full.stat()
    except FileNotFoundError:
        return f"the private key {path} does not exist"
    except OSError as exc:
        return f"the private key {path} cannot be read: {exc.strerror or exc}"
    if not stat.S_ISREG(st.st_mode):
        return f"the private key {path} is not a regular file"
    if not os.access(full, os.R_OK):
        return f"the private key {path} cannot be read by this user (uid {os.getuid()})"
    mode = stat.S_IMODE(st.st_mode)
    others = mode & 0o077 if st.st_uid == os.getuid() else mode & 0o004
    if others:
        return (
            f"the private key {path} has mode {mode:04o}: other users can read it (OpenSSH refuses such a key, "
            f"'Permissions {mode:04o} … are too open'); chmod 600 {path}"
        )
    return None


def _origin(inventory: Inventory, node: str, jump: bool) -> list[str | int]:
    """Where the node's (or its jump host's) key_file is written: the node's own ssh, else its first group's
    ssh_defaults that writes one."""
    tail: list[str | int] = ["jump", "key_file"] if jump else ["key_file"]
    doc = inventory.document
    own: list[str | int] = ["nodes", node, "ssh", *tail]
    if _written(doc, own):
        return own
    for gname, group in inventory.groups.items():
        loc: list[str | int] = ["groups", gname, "ssh_defaults", *tail]
        if node in group.nodes and _written(doc, loc):
            return loc
    return own


def _written(doc: object, loc: list[str | int]) -> bool:
    for key in loc:
        if not isinstance(doc, dict) or key not in doc:
            return False
        doc = doc[key]
    return True


def check_key_files(inventory: Inventory, nodes: Iterable[str]) -> None:
    """Raise :class:`InventoryError` (exit 2) for the first unusable ``key_file`` of ``nodes`` (and their jump
    hosts and VM guests), naming the inventory's file, line and field."""
    for name in nodes:
        spec = inventory.nodes[name]
        if spec.connection != "ssh":
            continue
        found: list[tuple[str, list[str | int]]] = []
        if spec.ssh.key_file:
            found.append((spec.ssh.key_file, _origin(inventory, name, jump=False)))
        if spec.ssh.jump is not None and spec.ssh.jump.key_file:
            found.append((spec.ssh.jump.key_file, _origin(inventory, name, jump=True)))
        for vmid, vm in spec.vms.items():
            if vm.address and vm.ssh.key_file:
                found.append((vm.ssh.key_file, ["nodes", name, "vms", vmid, "ssh", "key_file"]))
        for key, loc in found:
            problem = key_problem(key)
            if problem is not None:
                raise InventoryError(
                    f"{problem}: fix the key or the inventory before gpuhost connects",
                    file=str(inventory.path),
                    line=yamlfile.line_of(inventory.document, loc),
                    field=".".join(map(str, loc)),
                )
