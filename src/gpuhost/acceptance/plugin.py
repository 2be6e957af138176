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

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gpuhost.acceptance.proof import Proof, ProofFailed, ProofSkipped, Prover, Subject, Suite
from gpuhost.acceptance.selection import NONE_SELECTED, Selection, ids, select

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


def _selection(config: pytest.Config) -> Selection | None:
    cached = getattr(config, "_gpuhost_selection", None)
    if cached is not None or not config.getoption("gpuhost_inventory", None):
        return cached
    from gpuhost.acceptance import connections
    from gpuhost.errors import UsageError
    from gpuhost.inventory.loader import load_inventory

    inv = load_inventory(config.getoption("gpuhost_inventory"))
    connections.use_inventory(inv)
    try:
        sel = select(
            inv,
            config.getoption("gpuhost_limit"),
            config.getoption("gpuhost_ctid") or [],
            config.getoption("gpuhost_vmid") or [],
        )
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from exc
    config._gpuhost_selection = sel  # type: ignore[attr-defined]
    return sel


class NoGuest:
    """The one parameter of a guest test when the inventory declares no such guest: the test skips with why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __repr__(self) -> str:
        return "none"


#: the selection's field each subject fixture ranges over
FIELDS = {"gpuhost_node": "nodes", "gpuhost_ct": "containers", "gpuhost_vm": "vms", "gpuhost_server": "servers"}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = metafunc.fixturenames
    wanted = [n for n in FIELDS if n in names]
    if not wanted:
        return
    sel = _selection(metafunc.config)
    if sel is None:
        metafunc.parametrize(wanted[0], [None], indirect=True, scope="module", ids=["no-inventory"])
        return
    order = ("gpuhost_server", "gpuhost_ct", "gpuhost_vm", "gpuhost_node")
    fixture, field = next((f, FIELDS[f]) for f in order if f in names)
    if field == "nodes":
        metafunc.parametrize(fixture, sel.nodes, indirect=True, scope="module")
        return
    params: list[Any] = list(ids(sel, field)) or [NoGuest(NONE_SELECTED[field])]
    metafunc.parametrize(fixture, params, indirect=True, scope="module", ids=str)


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
    from gpuhost.acceptance import connections

    return connections.inventory()


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


@pytest.fixture
def prove(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``prove(check_fn, *args, not_applicable='why')``: call a registered check and report its finding.

    The finding goes into the test's ``user_properties`` (and so into JUnit XML); a FAIL fails the test
    with the finding's text; a check that does not apply (returns ``None``) skips with ``not_applicable``.
    """
    prover = Prover(request.node.user_properties)

    def run(fn: Any, *args: Any, not_applicable: str = "") -> Any:
        with _as_pytest_outcome():
            return prover(fn, *args, not_applicable=not_applicable)

    return run


@contextlib.contextmanager
def _as_pytest_outcome() -> Iterator[None]:
    """A proof's failure or skip as pytest's (its message alone, no traceback)."""
    try:
        yield
    except ProofFailed as exc:
        pytest.fail(str(exc), pytrace=False)
    except ProofSkipped as exc:
        pytest.skip(str(exc))


@pytest.fixture
def proof_reads(subject: Subject, request: pytest.FixtureRequest) -> None:
    """The reads the test's proof needs, made (once per subject) before it runs: their failure is the test's
    error and their skip its skip, as a module fixture's would be."""
    with _as_pytest_outcome():
        subject.require(request.function.gpuhost_needs)


def suite_tests(suite: Suite) -> dict[str, Callable[..., None]]:
    """A suite's proofs as test functions (``test_NAME``, parametrised by ``param`` where a name has several),
    for a suite module's globals. Each needs a module fixture ``subject`` (a :class:`Subject`)."""
    tests: dict[str, Callable[..., None]] = {}
    for name, group in suite.groups().items():
        fn = _one_test(group[0]) if group[0].param is None else _parametrised(group)
        fn.__name__ = fn.__qualname__ = f"test_{name}"
        fn.gpuhost_needs = group[0].needs  # type: ignore[attr-defined]
        tests[fn.__name__] = fn
    return tests


def _run(proof: Proof, subject: Subject, request: pytest.FixtureRequest) -> None:
    with _as_pytest_outcome():
        proof.run(subject, Prover(request.node.user_properties))


def _one_test(proof: Proof) -> Callable[..., None]:
    def test(subject: Subject, proof_reads: None, request: pytest.FixtureRequest) -> None:
        _run(proof, subject, request)

    return test


def _parametrised(group: list[Proof]) -> Callable[..., None]:
    @pytest.mark.parametrize("proof", group, ids=[str(p.param) for p in group])
    def test(subject: Subject, proof_reads: None, request: pytest.FixtureRequest, proof: Proof) -> None:
        _run(proof, subject, request)

    return test


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    sel = getattr(session.config, "_gpuhost_selection", None)
    if sel is None:
        return
    from gpuhost.acceptance.plain import finish

    config = session.config
    report = finish(
        sel,
        drift=config.getoption("gpuhost_drift"),
        save_snapshot=config.getoption("gpuhost_save_snapshot") and exitstatus == 0,
    )
    if report is not None:
        config._gpuhost_drift = report  # type: ignore[attr-defined]


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
