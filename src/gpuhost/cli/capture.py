"""``gpuhost capture NODE``: one read-only bundle of the node, for a lab replica or a bug report."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuhost.cli.playbook_run import InventoryOpt
from gpuhost.cli.root import app
from gpuhost.errors import GpuhostError, UsageError


@app.command("capture")
def capture_command(
    node: str = typer.Argument(..., help="A node of the inventory."),
    inventory: Path = InventoryOpt,
    output: Path = typer.Option(None, "-o", "--output", help="The bundle to write (default: NODE.capture.tar.gz)."),
    anonymise: bool = typer.Option(False, "--anonymise", help="Replace host names and addresses consistently."),
    max_file_mib: int = typer.Option(8, "--max-file-mib", help="Most MiB kept of one command's output."),
    max_total_mib: int = typer.Option(64, "--max-total-mib", help="Most MiB of the whole bundle (more: none)."),
) -> None:
    """Read a node's PCI devices, IOMMU groups, GPUs, boot loader, modules, packages, guests, storage and
    cluster into one bundle (read-only; secrets never captured).

    Example: gpuhost capture pve1 -i inventory/site.yml -o pve1.capture.tar.gz
    """
    from gpuhost.capture.bundle import Budget, manifest, write_bundle
    from gpuhost.capture.take import take
    from gpuhost.cli.output import console
    from gpuhost.inventory.loader import load_inventory
    from gpuhost.runner.connect import open_connection, secret_fields

    if max_file_mib < 1 or max_total_mib < 1:
        raise UsageError("--max-file-mib and --max-total-mib must be at least 1")
    inv = load_inventory(inventory)
    if node not in inv.nodes:
        raise UsageError(f"'{node}' is not a node of {inventory}")
    target = output or Path(f"{node}.capture.tar.gz")
    if not target.parent.is_dir():
        raise UsageError(f"-o {target}: folder {target.parent} does not exist")
    spec = inv.nodes[node]
    for _field, read in secret_fields(spec):
        try:
            read()  # registers the secret with gpuhost.redact: masked in every captured file
        except GpuhostError:
            pass  # a secret gpuhost cannot read is not one it could mask; the line scrubber still runs
    budget = Budget(per_file=max_file_mib << 20, total=max_total_mib << 20)
    with open_connection(spec) as conn:
        files, shown, taken = take(conn, node, anonymise=anonymise, budget=budget)
    from gpuhost import __version__

    doc = manifest(shown, files, taken=taken, anonymised=anonymise, budget=budget, version=__version__)
    write_bundle(target, doc, files, budget)
    failed = sum(1 for f in files if f.exit_code != 0)
    scrubbed = sum(f.scrubbed_lines for f in files)
    cut = [f.path for f in files if f.truncated]
    console.print(
        f"capture: {target} ({len(files)} files, {failed} commands failed on the host, exit codes in the manifest)"
    )
    if scrubbed:
        console.print(f"capture: {scrubbed} line(s) that looked like secrets were removed")
    for path in cut:
        console.print(f"capture: {path} cut at {max_file_mib} MiB")
