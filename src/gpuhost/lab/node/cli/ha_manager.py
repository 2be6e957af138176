"""ha-manager: status, add, crm-command node-maintenance enable|disable NODE, crm-command disarm-ha|arm-ha.

``status`` prints ``"$type $status"`` per entry (pve-ha-manager ``src/PVE/CLI/ha_manager.pm``, ``status``) of
``src/PVE/API2/HA/Status.pm`` as of pve-ha-manager 4.0/5.0 (the lab's PVE 8 and 9 package versions, before
2d143ac added the fencing line and the watchdog field): ``quorum OK`` (or ``No quorum on node 'N'!``), ``master
NODE (active, TIME)``, ``lrm NODE (STATE, TIME)`` (``maintenance mode``, ``idle`` without services, ``old timestamp
- dead?`` for a node that stopped updating), and ``service SID (NODE, STATE)``; TIME is Perl's scalar
``localtime``. A node outside a cluster prints ``quorum OK`` alone. While disarmed in ``ignore`` mode every
service reads ``ignore`` (``$add_service``). ``add SID [--state S]`` appends the resource to
``/etc/pve/ha/resources.cfg`` (``PVE::API2::HA::Resources``, ``create``; SectionConfig's format); ``crm-command``
queues a CRM command (``ha_manager.pm`` ``node-maintenance`` => ``node-maintenance-set``).
"""

from __future__ import annotations

import fcntl
import os
import re
import sys
import time

from gpuhost.lab.node.cli.cluster_link import NotClustered, ask, ask_json

RESOURCES = "/etc/pve/ha/resources.cfg"
STATES = ("started", "stopped", "enabled", "disabled", "ignored")


def status() -> str:
    node = os.uname().nodename
    try:
        st = ask_json("ha-status")
    except NotClustered:
        return "quorum OK\n"  # a standalone node (capture tests/fixtures/cluster/ha-manager-status/standalone-node.txt)
    now = time.ctime()
    lines = ["quorum OK" if st["quorate"] else f"quorum No quorum on node '{node}'!"]
    if st["master"]:
        lines.append(f"master {st['master']} (active, {now})")
    for name in sorted(st["lrm"]):
        lines.append(f"lrm {name} ({st['lrm'][name]}, {now})")
    for s in st["services"]:
        lines.append(f"service {s['sid']} ({s['node']}, {s['state']})")
    return "\n".join(lines) + "\n"


def add(args: list[str]) -> int:
    if not args:
        print("400 not enough arguments\nha-manager add <sid> [OPTIONS]", file=sys.stderr)
        return 255
    sid = args[0] if ":" in args[0] else f"vm:{args[0]}"  # PVE::HA::Config::parse_sid: a bare number is a VM
    if not re.fullmatch(r"(vm|ct):[1-9]\d{2,8}", sid):
        print(
            "400 Parameter verification failed.\nsid: invalid format - value does not look like a valid ha resource id",
            file=sys.stderr,
        )
        return 255
    state = "started"
    if "--state" in args:
        state = args[args.index("--state") + 1]
        if state not in STATES:
            print(
                f"400 Parameter verification failed.\nstate: value '{state}' does not have a value in the "
                f"enumeration '{', '.join(STATES)}'",
                file=sys.stderr,
            )
            return 255
    kind, vmid = sid.split(":")
    sub = "lxc" if kind == "ct" else "qemu-server"
    if not any(os.path.exists(f"/etc/pve/nodes/{n}/{sub}/{vmid}.conf") for n in os.listdir("/etc/pve/nodes")):
        print(f"unable to find {'container' if kind == 'ct' else 'VM'} '{vmid}'", file=sys.stderr)
        return 255
    os.makedirs(os.path.dirname(RESOURCES), exist_ok=True)
    with open(RESOURCES, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        text = fh.read()
        if re.search(rf"^{kind}:\s*{vmid}\s*$", text, re.M):
            print(f"resource ID '{sid}' already defined", file=sys.stderr)
            return 255
        fh.write(("\n" if text and not text.endswith("\n\n") else "") + f"{kind}: {vmid}\n\tstate {state}\n\n")
    return 0


def crm_command(args: list[str]) -> int:
    try:
        reply = ask("ha-crm " + " ".join(args))
    except NotClustered:
        print("no quorum - unable to write the CRM command", file=sys.stderr)
        return 255
    if reply != "ok":
        print(reply.removeprefix("error: "), file=sys.stderr)
        return 255
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["status"]:
        sys.stdout.write(status())
        return 0
    if argv[:1] == ["add"]:
        return add(argv[1:])
    if argv[:1] == ["crm-command"] and len(argv) > 1:
        return crm_command(argv[1:])
    print(
        f"ERROR: unknown command 'ha-manager {' '.join(argv)}' (the lab has: status, add, crm-command)", file=sys.stderr
    )
    return 255


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
