"""pct: the Proxmox VE container toolkit, for the subcommands gpuhost uses."""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import sys
from collections.abc import Callable
from typing import Any

from gpuhost.lab.node import ct_runtime, guests, lxc, schema
from gpuhost.lab.node.cli.args import UsageError, is_true, parse, run
from gpuhost.lab.node.errors import PveError
from gpuhost.lab.node.pveconf import encode_text

ROOT = "root@pam"
_USAGE = {
    "create": "pct create <vmid> <ostemplate> [OPTIONS]",
    "config": "pct config <vmid> [OPTIONS]",
    "set": "pct set <vmid> [OPTIONS]",
    "start": "pct start <vmid> [OPTIONS]",
    "stop": "pct stop <vmid> [OPTIONS]",
    "shutdown": "pct shutdown <vmid> [OPTIONS]",
    "reboot": "pct reboot <vmid> [OPTIONS]",
    "status": "pct status <vmid> [OPTIONS]",
    "exec": "pct exec <vmid> [<extra-args>] [OPTIONS]",
    "push": "pct push <vmid> <file> <destination> [OPTIONS]",
    "pull": "pct pull <vmid> <path> <destination> [OPTIONS]",
    "destroy": "pct destroy <vmid> [OPTIONS]",
    "list": "pct list",
    "pending": "pct pending <vmid>",
}


def _settable(key: str) -> bool:
    try:
        schema.check_key("lxc", key)
        return True
    except PveError:
        return key in (
            "delete",
            "revert",
            "digest",
            "storage",
            "start",
            "password",
            "ssh-public-keys",
            "pool",
            "restore",
            "force",
            "ignore-unpack-errors",
            "unique",
        )


def main(argv: list[str]) -> int:
    return run(lambda: _main(argv))


def _vmid(pos: list[str], cmd: str) -> int:
    if not pos:
        raise UsageError("400 not enough arguments", _USAGE[cmd])
    return guests.parse_vmid(pos[0])


def _main(argv: list[str]) -> int:
    if not argv:
        raise UsageError("ERROR: no command specified", "USAGE: pct <COMMAND> [ARGS] [OPTIONS]")
    cmd, rest = argv[0], argv[1:]
    if cmd not in _USAGE:
        raise UsageError(f"ERROR: unknown command 'pct {cmd}'", "USAGE: pct <COMMAND> [ARGS] [OPTIONS]")
    usage = _USAGE[cmd]
    if cmd in ("set", "create"):
        p = parse(rest, flags={"start", "unprivileged", "onboot", "force", "unique"}, known=_settable, usage=usage)
        vmid = _vmid(p.positional, cmd)
        opts = dict(p.options)
        if cmd == "create":
            if len(p.positional) < 2:
                raise UsageError("400 not enough arguments", usage)
            start = is_true(opts.pop("start", "0"))
            lines = lxc.create(vmid, p.positional[1], opts, authuser=ROOT)
            if start:
                lines += lxc.start(vmid)
            _sync_task_end(lines)
            return 0
        delete = [d for d in (opts.pop("delete", "") or "").replace(";", ",").split(",") if d]
        revert = [d for d in (opts.pop("revert", "") or "").split(",") if d]
        lxc.update(vmid, opts, delete, revert, authuser=ROOT, digest=opts.pop("digest", None))
        return 0
    if cmd == "list":  # pct.pm: printf "%-10s %-10s %-12s %-20s\n", nothing at all without containers
        cts = lxc.list_cts()
        if cts:
            print(f"{'VMID':<10} {'Status':<10} {'Lock':<12} {'Name':<20}")
        for ct in cts:
            print(f"{ct['vmid']!s:<10} {ct['status']!s:<10} {ct.get('lock', '')!s:<12} {ct['name']!s:<20}")
        return 0
    if cmd == "exec":
        p = parse(rest, usage=usage)
        vmid = _vmid(p.positional, cmd)
        command = p.rest or p.positional[1:]
        guests.load("lxc", vmid)
        if not command:
            command = ["/bin/bash", "-l"]
        return ct_runtime.exec_in(vmid, command)
    p = parse(rest, flags={"current", "force", "purge", "skiplock", "verbose", "forceStop"}, usage=usage)
    vmid = _vmid(p.positional, cmd)
    if cmd == "config":
        cfg = lxc.config(vmid, current=is_true(p.options.get("current")), snapshot=p.options.get("snapshot"))
        for key in sorted(cfg):
            if key in ("digest", "lxc"):
                continue
            value = cfg[key]
            print(f"{key}: {encode_text(str(value)) if key == 'description' else value}")
        raw_lines = cfg.get("lxc", [])
        for k, v in raw_lines if isinstance(raw_lines, list) else []:
            print(f"{k}: {v}")
    elif cmd == "pending":
        from gpuhost.lab.node.cli.qm import _print_pending

        for item in lxc.pending_view(vmid):
            _print_pending(item)
    elif cmd == "status":
        print(f"status: {lxc.status(vmid)['status']}")
    elif cmd == "start":
        _sync_task_end(lxc.start(vmid))
    elif cmd == "stop":
        lxc.stop(vmid)
    elif cmd == "shutdown":
        lxc.shutdown(vmid)
    elif cmd == "reboot":
        _sync_task_end(lxc.reboot(vmid))
    elif cmd == "destroy":
        lxc.destroy(vmid)
    elif cmd in ("push", "pull"):
        if len(p.positional) < 3:
            raise UsageError("400 not enough arguments", usage)
        guests.load("lxc", vmid)
        src, dst = p.positional[1], p.positional[2]
        if cmd == "push":
            target = ct_runtime.ct_path(vmid, dst)
            perms = int(p.options.get("perms", "644"), 8)
            uid = _id(p.options.get("user"), pwd.getpwnam, "pw_uid")
            gid = _id(p.options.get("group"), grp.getgrnam, "gr_gid")
            try:
                src_fh = open(src, "rb")  # noqa: SIM115 - closed below
            except FileNotFoundError:
                raise PveError(f"failed to open {src} for reading") from None
            with src_fh:
                try:
                    # owner and mode before content (as PVE: the file never exists with looser permissions)
                    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, perms)
                except OSError:
                    raise PveError(f"failed to open {dst} for writing") from None
                os.fchown(fd, uid, gid)
                os.fchmod(fd, perms)
                with os.fdopen(fd, "wb") as out:
                    shutil.copyfileobj(src_fh, out, 1 << 20)
        else:
            try:
                shutil.copyfile(ct_runtime.ct_path(vmid, src), dst)
            except FileNotFoundError:
                raise PveError(f"failed to open {src} for reading") from None
    return 0


def _id(value: str | None, lookup: Callable[[str], Any], attr: str) -> int:
    if value is None:
        return 0
    return int(value) if value.isdigit() else getattr(lookup(value), attr)


def _sync_task_end(lines: list[str]) -> None:
    """A task run from the CLI: its log on stdout, its warning count on stderr (pve-common
    RESTEnvironment.pm:442-498, the synchronous tee)."""
    for line in lines:
        print(line)
    warnings = sum(1 for line in lines if line.startswith("WARN: "))
    if warnings:
        sys.stdout.flush()
        print(f"Task finished with {warnings} warning(s)!", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
