"""``gpuhost verify p2p``: measure (or read) GPU peer-to-peer paths and judge them; ``verify host|lxc|vm|serve``:
the matching part of the acceptance suite."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuhost.cli.output import console, error, print_json
from gpuhost.cli.root import app
from gpuhost.connection.base import Connection
from gpuhost.errors import GpuhostError, UsageError

verify_app = typer.Typer(
    help="Verify a deployment: the host, its GPU containers and VMs, launched servers, GPU peer-to-peer paths.",
    no_args_is_help=True,
)
app.add_typer(verify_app, name="verify")


def _connection(host: str | None, inventory: Path | None) -> Connection:
    from gpuhost.connection.local import LocalConnection
    from gpuhost.runner.connect import open_connection

    if host is None:
        return LocalConnection()
    if inventory is None:
        raise UsageError("--host needs -i INVENTORY")
    from gpuhost.inventory.loader import load_inventory

    inv = load_inventory(inventory)
    if host not in inv.nodes:
        raise UsageError(f"'{host}' is not a node of {inventory}")
    return open_connection(inv.nodes[host])


@verify_app.command("p2p")
def p2p_command(
    host: str | None = typer.Option(None, "--host", help="Node of the inventory to probe (default: this machine)."),
    inventory: Path | None = typer.Option(
        None, "-i", "--inventory", help="Inventory file (YAML).", envvar="GPUHOST_INVENTORY", metavar="FILE"
    ),
    ctid: int | None = typer.Option(None, "--ctid", help="Probe inside this LXC on the node (pct push/exec)."),
    from_file: list[Path] | None = typer.Option(
        None,
        "--from-file",
        help="Judge saved outputs instead of probing "
        "(repeat for captures of one machine, e.g. topo -m and nvbandwidth): "
        "probe JSON, p2pBandwidthLatencyTest, nvbandwidth text, nccl-tests, "
        "nvidia-smi topo -m or -p2p.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (schema gpuhost.verify-p2p/2)."),
    heatmap: Path | None = typer.Option(None, "--heatmap", help="Write bandwidth/latency matrices as a PNG."),
    baseline: Path | None = typer.Option(None, "--baseline", help="Flag figures that fell below this earlier run."),
    save_report: Path | None = typer.Option(None, "--save-report", help="Also write the probe's raw JSON here."),
    expect_p2p: bool = typer.Option(
        True,
        "--expect-p2p/--no-expect-p2p",
        help="Fail when P2P is unavailable (default), or only judge the staged path.",
    ),
    link: str | None = typer.Option(None, "--link", help="Link of a capture that does not say, e.g. gen5x16."),
    size_mib: int = typer.Option(256, "--size-mib", min=1, help="Bytes per bandwidth copy, MiB."),
    samples: int = typer.Option(5, "--samples", min=1, help="Samples per figure (median reported)."),
    devices: str | None = typer.Option(None, "--devices", help="CUDA ordinals to probe, e.g. 0,1."),
    staged: bool = typer.Option(True, "--staged/--no-staged", help="Also measure copies staged through host."),
    nccl: bool = typer.Option(True, "--nccl/--no-nccl", help="NCCL all-reduce check when torch imports there."),
) -> None:
    """Measure every GPU pair (or read captures), judge it, and explain the verdict.

    Exit 0 pass (warnings allowed), 1 fail, 2 cannot run (nothing could be judged).
    """
    from gpuhost.cli.config import json_output
    from gpuhost.p2p.json_out import cannot_run_json
    from gpuhost.p2p.service import P2PRequest, verify_p2p

    as_json = json_output(as_json)
    request = P2PRequest(
        from_file=from_file or (),
        host=host,
        ctid=ctid,
        expect_p2p=expect_p2p,
        link=link,
        baseline=baseline,
        save_report=save_report,
        heatmap=heatmap,
        size_mib=size_mib,
        samples=samples,
        devices=devices,
        staged=staged,
        nccl=nccl,
    )
    try:
        outcome = verify_p2p(request, lambda: _connection(host, inventory))
    except GpuhostError as exc:
        if as_json:
            print_json(cannot_run_json(exc.exit_code, str(exc)))
        else:
            error(str(exc))
        raise typer.Exit(exc.exit_code) from exc

    if as_json:
        from gpuhost.p2p.json_out import outcome_json

        print_json(outcome_json(outcome))
    else:
        from gpuhost.p2p.tables import render

        for item in render(outcome):
            console.print(item)
    raise typer.Exit(outcome.exit_code)


def _run_and_print(
    kind: str,
    inventory: Path,
    *,
    limit: str | None,
    ctids: list[int],
    as_json: bool,
    junit_xml: Path | None,
    drift: bool,
    verbose: bool,
    vmids: list[int] | None = None,
) -> None:
    from gpuhost.acceptance.expect import check_inputs
    from gpuhost.acceptance.run import run_suite
    from gpuhost.cli.config import json_output
    from gpuhost.cli.output import print_json, print_suite

    as_json = json_output(as_json)
    check_inputs(inventory, kind, limit, ctids, vmids or [])
    report = run_suite(
        kind,  # type: ignore[arg-type]
        inventory,
        limit=limit,
        ctids=ctids,
        vmids=vmids,
        junit_xml=junit_xml,
        drift=drift,
        under_pytest=verbose,
    )
    if as_json:
        print_json(report.to_json())
    else:
        if verbose:
            console.print(report.output, markup=False, highlight=False)
        print_suite(report)
        if junit_xml is not None:
            console.print(f"JUnit XML: {junit_xml}")
    raise typer.Exit(report.exit_code)


InventoryOpt = typer.Option(
    ..., "-i", "--inventory", help="Inventory file (YAML).", envvar="GPUHOST_INVENTORY", metavar="FILE"
)
JunitOpt = typer.Option(None, "--junit-xml", help="Also write the results as JUnit XML (for CI systems).")
DriftOpt = typer.Option(False, "--drift", help="Also list what changed since the last provision.")
VerboseOpt = typer.Option(False, "--verbose", "-v", help="Run the suite under pytest and also show its own output.")


@verify_app.command("host")
def verify_host_command(
    inventory: Path = InventoryOpt,
    limit: str | None = typer.Option(None, "--limit", "-l", help="Only these nodes or groups (comma list)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (schema gpuhost.verify/2)."),
    junit_xml: Path | None = JunitOpt,
    drift: bool = DriftOpt,
    verbose: bool = VerboseOpt,
) -> None:
    """Prove each node booted as provisioned: IOMMU tokens (booted and in the boot entry), passthrough,
    groups, driver, uvm, persistenced, vfio-pci (the host part of the acceptance suite).

    Exit 0 when every check passes, 1 when one fails, 2 on bad input.
    """
    _run_and_print(
        "host",
        inventory,
        limit=limit,
        ctids=[],
        as_json=as_json,
        junit_xml=junit_xml,
        drift=drift,
        verbose=verbose,
    )


@verify_app.command("lxc")
def verify_lxc_command(
    inventory: Path = InventoryOpt,
    limit: str | None = typer.Option(None, "--limit", "-l", help="Only these nodes or groups (comma list)."),
    ctid: list[int] = typer.Option([], "--ctid", help="Only this container (repeat for more)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (schema gpuhost.verify/2)."),
    junit_xml: Path | None = JunitOpt,
    drift: bool = DriftOpt,
    verbose: bool = VerboseOpt,
) -> None:
    """Prove each GPU container is ready: running, devN entries, device nodes, GPUs listed, driver = host
    module, driver held, uvm, memlock, cuInit (the LXC part of the acceptance suite).

    Exit 0 when every check passes, 1 when one fails, 2 on bad input.
    """
    _run_and_print(
        "lxc",
        inventory,
        limit=limit,
        ctids=ctid,
        as_json=as_json,
        junit_xml=junit_xml,
        drift=drift,
        verbose=verbose,
    )


@verify_app.command("vm")
def verify_vm_command(
    inventory: Path = InventoryOpt,
    limit: str | None = typer.Option(None, "--limit", "-l", help="Only these nodes or groups (comma list)."),
    vmid: list[int] = typer.Option([], "--vmid", help="Only this VM (repeat for more)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (schema gpuhost.verify/2)."),
    junit_xml: Path | None = JunitOpt,
    verbose: bool = VerboseOpt,
) -> None:
    """Prove each GPU VM is ready: running, q35, each GPU its own vfio-pci hostpciN (.0) on a PCIe root port,
    the clique -set lines, no kvm=off, vfio-pci on the host; in the guest (SSH at its address): driver loaded,
    persistenced, P2P between the GPUs of a clique (the VM part of the acceptance suite).

    Exit 0 when every check passes, 1 when one fails, 2 on bad input.
    """
    _run_and_print(
        "vm",
        inventory,
        limit=limit,
        ctids=[],
        vmids=vmid,
        as_json=as_json,
        junit_xml=junit_xml,
        drift=False,
        verbose=verbose,
    )


@verify_app.command("serve")
def verify_serve_command(
    inventory: Path = InventoryOpt,
    limit: str | None = typer.Option(None, "--limit", "-l", help="Only these nodes or groups (comma list)."),
    ctid: list[int] = typer.Option([], "--ctid", help="Only this container (repeat for more)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (schema gpuhost.verify/2)."),
    junit_xml: Path | None = JunitOpt,
    verbose: bool = VerboseOpt,
    group: str | None = typer.Option(
        None, "--group", help="A serving group: each replica, then its gateway end to end (requests through it)."
    ),
) -> None:
    """Prove each launched server serves correctly: unit active, /health 200, a smoke completion, the accuracy
    canary with finite logprobs, /server_info = the profile, single-stream TTFT and tokens/s (the serve part of
    the acceptance suite).

    With --group: the group's replicas, then its gateway: every replica healthy in it (a dead one is named) and
    requests through it answered and spread over the replicas.

    Exit 0 when every check passes, 1 when one fails, 2 on bad input.
    """
    if group:
        from gpuhost.cli.config import json_output
        from gpuhost.cli.output import print_findings
        from gpuhost.inventory.loader import load_inventory
        from gpuhost.runner.connect import open_connection
        from gpuhost.serve.service import verify_group

        report = verify_group(load_inventory(inventory), group, connect=open_connection)
        if json_output(as_json):
            print_json(report.to_json())
        else:
            print_findings(report.findings)
        raise typer.Exit(report.exit_code)
    _run_and_print(
        "serve",
        inventory,
        limit=limit,
        ctids=ctid,
        as_json=as_json,
        junit_xml=junit_xml,
        drift=False,
        verbose=verbose,
    )
