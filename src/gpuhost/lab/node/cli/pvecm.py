"""pvecm status: the cluster's part of corosync.conf, then ``corosync-quorumtool -siH``.

proxmox/pve-cluster ``src/PVE/CLI/pvecm.pm`` (7091d92, ``status``): ``check_conf_exists`` first ("Error: Corosync
config '/etc/pve/corosync.conf' does not exist - is this node part of a cluster?", exit 2 on a standalone node),
then "Cluster information" with ``printf "%-17s %s\\n"`` of the totem's cluster_name, config_version, transport
(default knet) and secauth (default off), a blank line, and ``exec('corosync-quorumtool', '-siH')``.
corosync/corosync ``tools/corosync-quorumtool.c`` (65235a8): ``show_status`` ("Quorum information", ``Date:`` as
ctime, ``Node ID: 0x%08x`` with -H, ``Ring ID: %x.%lx``, ``Quorate:``), the votequorum part (``Quorum: %d %s`` with
" " when quorate and "Activity blocked" when not; ``Flags:`` each flag followed by a space), and
``display_nodes_data`` (``%10s `` headers, ``0x%08x `` ids, ``%10u `` votes, the address with -i, `` (local)``).
"""

from __future__ import annotations

import os
import re
import sys
import time

from gpuhost.lab.node.cli.cluster_link import NotClustered, ask_json

COROSYNC_CONF = "/etc/pve/corosync.conf"


def _totem(text: str) -> dict[str, str]:
    m = re.search(r"^totem\s*\{(.*?)^\}", text, re.M | re.S)
    body = re.sub(r"\{[^{}]*\}", "", m.group(1)) if m else ""  # nested blocks (interface) are not the totem's own
    return dict(re.findall(r"^\s*(\w+):\s*(\S+)\s*$", body, re.M))


def status() -> str:
    totem = _totem(open(COROSYNC_CONF).read())
    q = ask_json("cluster-status")
    lines = ["Cluster information", "-------------------"]
    for label, key, default in (
        ("Name", "cluster_name", "UNKOWN?"),  # sic, pvecm.pm
        ("Config Version", "config_version", "-1"),
        ("Transport", "transport", "knet"),
        ("Secure auth", "secauth", "off"),
    ):
        lines.append(f"{label + ':':<17} {totem.get(key, default)}")
    members = q["members"]
    local = next((m for m in q["members"] if m["name"] == q["local"]), None)
    nodeid = local["nodeid"] if local else 0
    quorate = bool(q["quorate"])
    lines += [
        "",
        "Quorum information",
        "------------------",
        f"Date:             {time.ctime()}",
        "Quorum provider:  corosync_votequorum",
        f"Nodes:            {len(members)}",
        f"Node ID:          0x{nodeid:08x}",
        f"Ring ID:          {min((m['nodeid'] for m in members), default=nodeid):x}.{int(time.time()) & 0xFFF:x}",
        f"Quorate:          {'Yes' if quorate else 'No'}",
        "",
        "Votequorum information",
        "----------------------",
        f"Expected votes:   {q['expected_votes']}",
        f"Highest expected: {q['expected_votes']}",
        f"Total votes:      {q['total_votes']}",
        f"Quorum:           {q['quorum']} {' ' if quorate else 'Activity blocked'}",
        "Flags:            " + ("Quorate " if quorate else ""),
        "",
        "Membership information",
        "----------------------",
        f"{'Nodeid':>10} {'Votes':>10} Name",
    ]
    for m in sorted(members, key=lambda m: m["address"]):  # "corosync sends them already sorted by address"
        mark = " (local)" if m["name"] == q["local"] else ""
        lines.append(f"0x{m['nodeid']:08x} {m['votes']:>10} {m['address']}{mark}")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if argv[:1] != ["status"]:
        print(f"ERROR: unknown command 'pvecm {' '.join(argv)}' (the lab has: pvecm status)", file=sys.stderr)
        return 255
    if not os.path.exists(COROSYNC_CONF):
        print(
            f"Error: Corosync config '{COROSYNC_CONF}' does not exist - is this node part of a cluster?",
            file=sys.stderr,
        )
        return 2
    try:
        sys.stdout.write(status())
    except NotClustered:
        print("Cannot initialize CMAP service", file=sys.stderr)  # corosync does not run on this node
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
