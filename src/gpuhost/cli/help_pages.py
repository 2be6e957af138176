"""What every ``--help`` page ends with: its exit codes and an example, for the commands whose own text lacks them.

Kept apart from the commands so that each page's last lines are in one place; a test walks every command's
``--help`` and fails on a page without both.
"""

from __future__ import annotations

import typer

#: the exit codes of a command that runs a playbook (``gpuhost.cli.failures``)
RUN_EXIT = (
    "Exit 0 every task ok or changed, 1 a task failed or a host was unreachable, 2 bad input (nothing changed), "
    "70 a bug in gpuhost."
)
DONE_EXIT = "Exit 0 done on every target, 1 a target failed or was unreachable, 2 bad input, 70 a bug in gpuhost."

#: command path → text added at the end of its help page
EPILOGS: dict[tuple[str, ...], str] = {
    ("bench", "sglang"): "Examples: gpuhost bench sglang -i site.yml -l pve1 --concurrency 1,64,256  |  "
    "gpuhost bench sglang --parse bench.jsonl --json",
    ("capture",): "Exit 0 the bundle was written, 1 the node could not be read (no bundle left), 2 bad input.",
    ("doctor", "dmesg"): "Example: dmesg | gpuhost doctor dmesg -",
    ("doctor", "nvidia-installer"): "Example: gpuhost doctor nvidia-installer /var/log/nvidia-installer.log",
    ("facts",): RUN_EXIT.replace("every task ok or changed", "the facts were read"),
    ("inventory",): "Exit 0 the inventory is valid, 2 bad input (its file, line and field are named).",
    ("lab", "up"): "Exit 0 the nodes are up, 1 a node did not start, 2 bad input. Example: gpuhost lab up --nodes 2",
    ("lab", "down"): "Exit 0 every node stopped, 1 one did not, 2 bad input. Example: gpuhost lab down",
    ("lab", "status"): "Exit 0 listed, 2 no lab in --state-dir. Example: gpuhost lab status",
    ("launch", "sglang"): "Examples: gpuhost launch sglang -i site.yml --check  |  "
    "gpuhost launch sglang -i site.yml --group glm5 --allow-restart",
    ("provision", "host"): RUN_EXIT,
    ("provision", "lxc"): RUN_EXIT,
    ("provision", "vm"): RUN_EXIT + " Example: gpuhost provision vm -i site.yml --check --diff",
    ("run",): RUN_EXIT,
    ("serve", "logs"): DONE_EXIT + " Example: gpuhost serve logs -i site.yml -l pve1 -n 200",
    ("serve", "restart"): DONE_EXIT + " Example: gpuhost serve restart -i site.yml -l pve1 --ctid 200",
    ("serve", "status"): "Exit 1 a server is down or unhealthy, 2 bad input. "
    "Example: gpuhost serve status -i site.yml --json",
    ("serve", "stop"): DONE_EXIT + " Example: gpuhost serve stop -i site.yml -l pve1",
    ("shell",): "70 a bug in gpuhost; 2 bad input (nothing run).",
    ("tune", "sglang"): "Example: gpuhost tune sglang -i site.yml -l pve1 --ctid 200 --concurrency 256,1024 --check",
    ("verify", "host"): "Example: gpuhost verify host -i site.yml -l pve1 --json",
    ("verify", "lxc"): "Example: gpuhost verify lxc -i site.yml --ctid 200",
    ("verify", "p2p"): "Examples: gpuhost verify p2p --host pve1 -i site.yml --ctid 200 --heatmap p2p.png  |  "
    "gpuhost verify p2p --from-file p2pBandwidthLatencyTest.txt",
    ("verify", "serve"): "Example: gpuhost verify serve -i site.yml -l pve1 --json",
    ("verify", "vm"): "Example: gpuhost verify vm -i site.yml --vmid 300",
}


def apply(app: typer.Typer, prefix: tuple[str, ...] = ()) -> None:
    """Set each registered command's epilog from :data:`EPILOGS` (once; a command's own epilog wins)."""
    for info in app.registered_commands:
        name = info.name or (info.callback.__name__.replace("_", "-") if info.callback else "")
        text = EPILOGS.get((*prefix, name))
        if text and not info.epilog:
            info.epilog = text
    for group in app.registered_groups:
        if group.typer_instance is not None and group.name:
            apply(group.typer_instance, (*prefix, group.name))
