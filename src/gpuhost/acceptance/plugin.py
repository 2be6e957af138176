"""The pytest plugin of gpuhost (entry point ``pytest11``): hosts and guests from the inventory.

Options: ``--gpuhost-inventory INV`` (the deployment), ``--gpuhost-limit PATTERN`` (nodes or groups),
``--gpuhost-ctid ID`` (only these containers), ``--gpuhost-vmid ID`` (only these VMs), ``--drift`` (list what
changed since the last provision), ``--gpuhost-save-snapshot`` (record the state as the new baseline when every
test passed).

Fixtures: ``gpuhost_inventory``; ``gpuhost_node`` / ``node_host`` (each selected node, and a testinfra
host on it over gpuhost's verified SSH); ``gpuhost_ct`` / ``ct_host`` (each container of those nodes,
and a testinfra host inside it through ``pct exec``); ``gpuhost_vm`` / ``vm_host`` (each VM the inventory
declares, and a testinfra host in its guest over SSH); ``gpuhost_server`` (each serving container);
``prove`` (call a named check and report its finding).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from gpuhost.checks.finding import Finding, Level

_NO_INVENTORY = "the acceptance suite runs against a deployment: pass --gpuhost-inventory INV"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpuhost", "gpuhost acceptance suite")
    group.addoption("--gpuhost-inventory", dest="gpuhost_inventory", metavar="INV", help="gpuhost inventory (YAML).")
    group.addoption(
        "--gpuhost-limit", dest="gpuhost_limit", metavar="PATTERN", help="Only these nodes or groups (comma list)."
    )
    group.addoption(
        "--gpuhost-ctid", dest="gpuhost_ctid", type=int, action="append", default=[], help="Only this container."
    )
    group.addoption("--gpuhost-vmid", dest="gpuhost_vmid", type=int, action="append", default=[], help="Only this VM.")
    group.addoption("--drift", action="store_true", dest="gpuhost_drift", help="List what changed since provision.")
    group.addoption(
        "--gpuhost-save-snapshot",
        action="store_true",
        dest="gpuhost_save_snapshot",
        help="When every test passed, record the state as the baseline --drift compares against.",
    )


@dataclass(frozen=True)
class Selection:
    """What the options select: node names, (node, ctid) pairs, (node, vmid) pairs, and the (node, ctid)
    pairs of the selected containers that serve (``serve:``)."""

    nodes: list[str]
    containers: list[tuple[str, int]]
    vms: list[tuple[str, int]]
    servers: list[tuple[str, int]]


def _selection(config: pytest.Config) -> Selection | None:
    cached = getattr(config, "_gpuhost_selection", None)
    if cached is not None or not config.getoption("gpuhost_inventory", None):
        return cached
    from gpuhost.acceptance import backend
    from gpuhost.inventory.loader import followers, load_inventory

    inv = load_inventory(config.getoption("gpuhost_inventory"))
    backend.use_inventory(inv)
    limit = config.getoption("gpuhost_limit")
    names = inv.select(limit) if limit else list(inv.nodes)
    ctids = set(config.getoption("gpuhost_ctid") or ())
    cts = [(n, c) for n in names for c in inv.nodes[n].containers if not ctids or c in ctids]
    if ctids and not cts:
        raise pytest.UsageError(f"--gpuhost-ctid {', '.join(map(str, sorted(ctids)))}: no such container")
    vmids = set(config.getoption("gpuhost_vmid") or ())
    vms = [(n, v) for n in names for v in inv.nodes[n].vms if not vmids or v in vmids]
    if vmids and not vms:
        raise pytest.UsageError(f"--gpuhost-vmid {', '.join(map(str, sorted(vmids)))}: no such VM")
    # a follower of a multi-node replica serves no API: its replica is proven on rank 0
    skip = followers(inv)
    servers = [(n, c) for n, c in cts if inv.nodes[n].containers[c].serve is not None and (n, c) not in skip]
    sel = Selection(names, cts, vms, servers)
    config._gpuhost_selection = sel  # type: ignore[attr-defined]
    return sel


class NoGuest:
    """The one parameter of a guest test when the inventory declares no such guest: the test skips with why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __repr__(self) -> str:
        return "none"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = metafunc.fixturenames
    wanted = [n for n in ("gpuhost_node", "gpuhost_ct", "gpuhost_vm", "gpuhost_server") if n in names]
    if not wanted:
        return
    sel = _selection(metafunc.config)
    if sel is None:
        metafunc.parametrize(wanted[0], [None], indirect=True, scope="module", ids=["no-inventory"])
        return
    if "gpuhost_server" in names:
        params: list[Any] = [f"{n}/{c}" for n, c in sel.servers] or [
            NoGuest("no serving containers in the inventory for the selected nodes (nodes.NAME.containers.ID.serve)")
        ]
        metafunc.parametrize("gpuhost_server", params, indirect=True, scope="module", ids=str)
    elif "gpuhost_ct" in names:
        params = [f"{n}/{c}" for n, c in sel.containers] or [
            NoGuest("no containers in the inventory for the selected nodes (nodes.NAME.containers)")
        ]
        metafunc.parametrize("gpuhost_ct", params, indirect=True, scope="module", ids=str)
    elif "gpuhost_vm" in names:
        params = [f"{n}/{v}" for n, v in sel.vms] or [
            NoGuest("no VM guests in the inventory for the selected nodes (nodes.NAME.vms)")
        ]
        metafunc.parametrize("gpuhost_vm", params, indirect=True, scope="module", ids=str)
    else:
        metafunc.parametrize("gpuhost_node", sel.nodes, indirect=True, scope="module")


def _param(request: pytest.FixtureRequest) -> Any:
    value = getattr(request, "param", None)
    if value is None:
        pytest.fail(_NO_INVENTORY, pytrace=False)
    if isinstance(value, NoGuest):
        pytest.skip(value.reason)
    return value


@pytest.fixture(scope="session")
def gpuhost_inventory(request: pytest.FixtureRequest) -> Any:
    if _selection(request.config) is None:
        pytest.fail(_NO_INVENTORY, pytrace=False)
    from gpuhost.acceptance import backend

    return backend.inventory()


@pytest.fixture(scope="module")
def gpuhost_node(request: pytest.FixtureRequest) -> str:
    return str(_param(request))


@pytest.fixture(scope="module")
def gpuhost_ct(request: pytest.FixtureRequest) -> tuple[str, int]:
    node, _, ctid = str(_param(request)).partition("/")
    return node, int(ctid)


@pytest.fixture(scope="module")
def gpuhost_vm(request: pytest.FixtureRequest) -> tuple[str, int]:
    node, _, vmid = str(_param(request)).partition("/")
    return node, int(vmid)


@pytest.fixture(scope="module")
def gpuhost_server(request: pytest.FixtureRequest) -> tuple[str, int]:
    node, _, ctid = str(_param(request)).partition("/")
    return node, int(ctid)


@pytest.fixture(scope="module")
def vm_host(gpuhost_vm: tuple[str, int]) -> Any:
    import testinfra

    node, vmid = gpuhost_vm
    return testinfra.get_host(f"qm-guest://{node}/{vmid}")


@pytest.fixture(scope="module")
def node_host(gpuhost_node: str) -> Any:
    import testinfra

    return testinfra.get_host(f"gpuhost://{gpuhost_node}")


@pytest.fixture(scope="module")
def ct_host(gpuhost_ct: tuple[str, int]) -> Any:
    import testinfra

    node, ctid = gpuhost_ct
    return testinfra.get_host(f"pct://{node}/{ctid}")


def describe(f: Finding) -> str:
    """A finding as the failure message of its test: check, subject and message, then cause and fix."""
    from gpuhost.redact import redact

    lines = [f"{f.check} {f.subject}: {redact(f.message)}"]
    if f.cause:
        lines.append(f"  cause: {redact(f.cause)}")
    if f.fix:
        lines.append(f"  fix:   {redact(f.fix)}")
    return "\n".join(lines)


Prove = Callable[..., Finding]


@pytest.fixture
def prove(request: pytest.FixtureRequest) -> Prove:
    """``prove(check_fn, *args, not_applicable='why')``: call a registered check and report its finding.

    The finding goes into the test's ``user_properties`` (and so into JUnit XML); a FAIL fails the test
    with the finding's text; a check that does not apply (returns ``None``) skips with ``not_applicable``.
    """

    def record(findings: list[Finding]) -> None:
        for f in findings:
            request.node.user_properties.append(("finding", json.dumps(f.to_json())))
        failed = [f for f in findings if f.level >= Level.FAIL]
        if failed:
            pytest.fail("\n".join(describe(f) for f in failed), pytrace=False)

    def run(
        fn: Callable[..., Finding | list[Finding] | None] | list[Finding], *args: Any, not_applicable: str = ""
    ) -> Any:
        if isinstance(fn, list):  # findings a pluggable proof module returned
            record(fn)
            return fn
        name = getattr(fn, "check_name", fn.__name__)
        request.node.user_properties.append(("check", name))
        finding = fn(*args)
        if finding is None or finding == []:
            pytest.skip(f"{name}: {not_applicable or 'does not apply to this host'}")
        record(finding if isinstance(finding, list) else [finding])
        return finding

    return run


def reachable(fn: Callable[[], Any]) -> Any:
    """Run a fact read; a connection or fact error fails the test naming it (never a traceback)."""
    from gpuhost.errors import GpuhostError

    try:
        return fn()
    except GpuhostError as exc:
        pytest.fail(f"reachable: {exc}", pytrace=False)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    sel = getattr(session.config, "_gpuhost_selection", None)
    if sel is None:
        return
    from gpuhost.acceptance import backend, drift

    config = session.config
    try:
        if config.getoption("gpuhost_drift"):
            config._gpuhost_drift = drift.check_all(backend.inventory(), sel.nodes, sel.containers)  # type: ignore[attr-defined]
        if config.getoption("gpuhost_save_snapshot") and exitstatus == 0:
            drift.save_all(backend.inventory(), sel.nodes, sel.containers)
    finally:
        backend.close_all()


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    report = getattr(config, "_gpuhost_drift", None)
    if report is None:
        return
    from gpuhost.acceptance.drift import render

    terminalreporter.section("gpuhost drift since the last provision")
    for line in render(report):
        terminalreporter.write_line(line)


def pytest_configure(config: pytest.Config) -> None:
    import gpuhost.acceptance.backend  # noqa: F401  (registers the pct://, qm-guest:// and gpuhost:// schemes)


def iter_findings(user_properties: list[tuple[str, Any]]) -> Iterator[Finding]:
    for key, value in user_properties:
        if key == "finding":
            d = json.loads(value)
            yield Finding(Level[d["level"]], d["check"], d["subject"], d["message"], d["cause"], d["fix"])
