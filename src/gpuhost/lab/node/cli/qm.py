"""qm: the Proxmox VE virtual machine manager, for the subcommands gpuhost uses."""

from __future__ import annotations

import sys

from gpuhost.lab.node import formats, qemu, schema
from gpuhost.lab.node.cli.args import UsageError, is_true, parse, run
from gpuhost.lab.node.errors import PveError
from gpuhost.lab.node.pveconf import encode_text

ROOT = "root@pam"
_USAGE = {
    "config": "qm config <vmid> [OPTIONS]",
    "set": "qm set <vmid> [OPTIONS]",
    "start": "qm start <vmid> [OPTIONS]",
    "stop": "qm stop <vmid> [OPTIONS]",
    "shutdown": "qm shutdown <vmid> [OPTIONS]",
    "status": "qm status <vmid> [OPTIONS]",
    "pending": "qm pending <vmid>",
    "showcmd": "qm showcmd <vmid> [OPTIONS]",
    "create": "qm create <vmid> [OPTIONS]",
    "destroy": "qm destroy <vmid> [OPTIONS]",
    "list": "qm list  [OPTIONS]",
}


def _settable(key: str) -> bool:
    try:
        schema.check_key("qemu", key)
        return True
    except PveError:
        return key in ("delete", "revert", "digest", "skiplock")


def _vmid(parsed_pos: list[str], cmd: str) -> int:
    from gpuhost.lab.node.guests import parse_vmid

    if not parsed_pos:
        raise UsageError("400 not enough arguments", _USAGE[cmd])
    return parse_vmid(parsed_pos[0])


def main(argv: list[str]) -> int:
    return run(lambda: _main(argv))


def _main(argv: list[str]) -> int:
    if not argv:
        raise UsageError("ERROR: no command specified", "USAGE: qm <COMMAND> [ARGS] [OPTIONS]")
    cmd, rest = argv[0], argv[1:]
    if cmd not in _USAGE:
        raise UsageError(f"ERROR: unknown command 'qm {cmd}'", "USAGE: qm <COMMAND> [ARGS] [OPTIONS]")
    usage = _USAGE[cmd]
    if cmd == "set" or cmd == "create":
        p = parse(rest, flags={"skiplock"}, known=_settable, usage=usage)
        vmid = _vmid(p.positional, cmd)
        opts = dict(p.options)
        formats.check_qemu_params(opts)
        if cmd == "create":
            qemu.create(vmid, opts)
            return 0
        delete = [d for d in (opts.pop("delete", "") or "").replace(";", ",").split(",") if d]
        revert = [d for d in (opts.pop("revert", "") or "").split(",") if d]
        digest = opts.pop("digest", None)
        skiplock = is_true(opts.pop("skiplock", "0"))
        shown = [f"-{k} {v}" for k, v in opts.items()] + ([f"-delete {','.join(delete)}"] if delete else [])
        qemu.update(vmid, opts, delete, revert, authuser=ROOT, digest=digest, skiplock=skiplock)
        print(f"update VM {vmid}: {' '.join(shown)}")
        return 0
    p = parse(
        rest,
        flags={
            "current",
            "pretty",
            "skiplock",
            "force-stop",
            "full",
            "purge",
            "verbose",
            "keepActive",
            "overrule-shutdown",
        },
        usage=usage,
    )
    if cmd == "list":  # qm.pm: printf "%10s %-20s %-10s %-10s %12.2f %-10s\n", nothing at all without VMs
        vms = qemu.list_vms()
        if vms:
            print(f"{'VMID':>10} {'NAME':<20} {'STATUS':<10} {'MEM(MB)':<10} {'BOOTDISK(GB)':>12} {'PID':<10}")
        for vm in vms:
            print(
                f"{vm['vmid']!s:>10} {vm['name']!s:<20} {vm['status']!s:<10} "
                f"{int(str(vm['maxmem'])) // 1048576!s:<10} {float(str(vm.get('maxdisk', 0))) / 1024**3:>12.2f} "
                f"{vm.get('pid', 0)!s:<10}"
            )
        return 0
    vmid = _vmid(p.positional, cmd)
    if cmd == "config":
        cfg = qemu.config(vmid, current=is_true(p.options.get("current")), snapshot=p.options.get("snapshot"))
        for key in sorted(cfg):
            if key == "digest":
                continue
            value = cfg[key]
            print(f"{key}: {encode_text(str(value)) if key == 'description' else value}")
    elif cmd == "pending":
        for item in qemu.pending_view(vmid):
            _print_pending(item)
    elif cmd == "status":
        st = qemu.status(vmid)
        if is_true(p.options.get("verbose")):
            for key in sorted(st):
                print(f"{key}: {st[key]}")
        else:
            print(f"status: {st['status']}")
    elif cmd == "start":
        qemu.start(vmid, skiplock=is_true(p.options.get("skiplock")))
    elif cmd == "stop":
        qemu.stop(vmid)
    elif cmd == "shutdown":
        qemu.shutdown(vmid)
    elif cmd == "showcmd":
        print(qemu.showcmd(vmid, pretty=is_true(p.options.get("pretty"))))
    elif cmd == "destroy":
        qemu.destroy(vmid)
    return 0


def _print_pending(item: dict[str, object]) -> None:
    """PVE::GuestHelpers::format_pending."""
    key = str(item["key"])
    value, pend = item.get("value"), item.get("pending")
    if key == "description":
        value = encode_text(str(value)) if value is not None else None
        pend = encode_text(str(pend)) if pend is not None else None
    if value is not None:
        if item.get("delete"):
            print(f"del {key}: {value}")
        elif pend is not None:
            print(f"cur {key}: {value}")
            print(f"new {key}: {pend}")
        else:
            print(f"cur {key}: {value}")
    elif pend is not None:
        print(f"new {key}: {pend}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
