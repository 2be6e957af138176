"""The product's import graph: no file-level cycle, and every import points down the layer order.

``cli`` → ``runner`` → ``playbook`` → ``roles`` → ``operations`` → ``checks`` → ``facts`` → ``core``,
with ``connection`` beside ``facts`` (both on ``core``, neither on the other); ``pve.config`` sits with
the facts, ``pve.api`` with the connection. The base modules (:data:`BASE`) may be imported from any
layer and import none. ``serve`` (profiles, flag tables, validator, launch command, log signatures) is the
serving library on the checks, below the operations: the sglang launch role and its operations build on it.
``p2p``, ``bench_serving`` and ``serve.service`` are applications on serve, checks, facts, connection and core. ``gpuhost.lab`` (test tooling), ``gpuhost.probe`` and ``gpuhost.tools`` (programs
shipped to targets) are not walked as the product; the product may not import the lab (only the ``gpuhost lab``
commands in ``cli`` front it), and the shipped programs must import nothing of gpuhost outside their own package.

Every import counts: at module level, inside functions (lazy), and under ``if TYPE_CHECKING:``, except
that a TYPE_CHECKING-only import may always name the core protocol (``gpuhost.core.context``).
:data:`KNOWN` lists the violations of today's code, each by name: a new one fails this test, and so
does a listed one that is gone (then delete it from the list).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PKG = SRC / "gpuhost"
NOT_WALKED = ("gpuhost.lab", "gpuhost.probe", "gpuhost.tools")
BASE = ("errors", "redact", "yamlfile", "usercache", "resources", "secrets", "templating", "inventory", "lazy_table")
CORE_PROTOCOL = "gpuhost.core.context"
APPS = ("p2p", "bench_serving", "capture")
#: ``gpuhost serve status|logs|stop|restart`` and ``verify serve --group``: an application on the serving library
#: (it opens connections through the ``connect`` it is given), beside it in ``serve/``
SERVE_SERVICE = "gpuhost.serve.service"

#: What each layer may import, besides itself and the base modules.
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "facts": {"core"},
    "connection": {"core"},
    "checks": {"facts", "core"},
    # the serving library (profiles, flag tables, validator, launch command, log signatures): pure, on the checks;
    # the sglang launch role and its operations are built on it
    "serve": {"checks", "facts", "core"},
    # vm_p2p judges the guest's P2P status with the P2P judge (a client of the check model)
    "operations": {"serve", "checks", "facts", "core", "app"},
    "roles": {"operations", "serve", "checks", "facts", "core"},
    "playbook": {"roles", "operations", "serve", "checks", "facts", "core"},
    "runner": {"playbook", "roles", "operations", "serve", "checks", "facts", "connection", "core"},
    "cli": {
        "acceptance",
        "doctor",
        "runner",
        "playbook",
        "roles",
        "operations",
        "serve",
        "checks",
        "facts",
        "connection",
        "core",
        "app",
    },
    # the acceptance suite proves deployments with the shared checks, over the runner's connections
    "acceptance": {
        "runner",
        "playbook",
        "roles",
        "operations",
        "serve",
        "checks",
        "facts",
        "connection",
        "core",
        "app",
    },
    # the doctor reads the stack with the acceptance suite's expectations and the shared checks, and ranks
    "doctor": {"acceptance", "runner", "roles", "operations", "serve", "checks", "facts", "connection", "core", "app"},
    "app": {"serve", "checks", "facts", "connection", "core"},
    "base": set(),
}

#: Violations in the code today, "importer -> imported (layer -> layer)". Fix the code, then delete the line.
KNOWN: set[str] = set()

#: File-level import cycles in the code today (sorted modules of each). Fix the code, then delete the entry.
KNOWN_CYCLES: list[list[str]] = []


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else ""
    if top in ("", "__main__"):
        return "cli"
    if top in BASE:
        return "base"
    if top in APPS or module == SERVE_SERVICE:
        return "app"
    if top == "pve":
        return "connection" if parts[2:3] == ["api"] else "facts"
    if top in ALLOWED:
        return top
    raise AssertionError(f"{module}: no layer assigned; add its package to the layer map of this test")


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int
    type_checking: bool


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolve(name: str, modules: set[str]) -> str | None:
    """The walked or excluded gpuhost module that ``name`` names (a module, else its package)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(path: Path, modules: set[str]) -> Iterator[Import]:
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))

    def visit(node: ast.AST, tc: bool) -> Iterator[Import]:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for stmt in node.body:
                yield from visit(stmt, True)
            for stmt in node.orelse:
                yield from visit(stmt, tc)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _resolve(alias.name, modules) if alias.name.startswith("gpuhost") else None
                if target:
                    yield Import(me, target, node.lineno, tc)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base.startswith("gpuhost"):
                for alias in node.names:
                    target = _resolve(f"{base}.{alias.name}", modules) or _resolve(base, modules)
                    if target and target != me:
                        yield Import(me, target, node.lineno, tc)
        for child in ast.iter_child_nodes(node):
            yield from visit(child, tc)

    yield from visit(tree, False)


def product_files() -> list[Path]:
    return [p for p in sorted(PKG.rglob("*.py")) if not module_name(p).startswith(NOT_WALKED)]


def all_modules() -> set[str]:
    return {module_name(p) for p in PKG.rglob("*.py")}


def graph() -> list[Import]:
    modules = all_modules()
    return [imp for p in product_files() for imp in imports_of(p, modules)]


def counted(imp: Import) -> bool:
    return not (imp.type_checking and imp.imported == CORE_PROTOCOL)


def violation(imp: Import) -> str | None:
    if imp.imported.startswith("gpuhost.lab"):
        ok = imp.importer.startswith("gpuhost.cli.")
        return None if ok else f"{imp.importer} -> {imp.imported} (product imports the lab)"
    if imp.imported.startswith(NOT_WALKED):
        return None  # reading a shipped program's constants keeps it standalone
    src, dst = layer_of(imp.importer), layer_of(imp.imported)
    if src == dst or dst == "base" or dst in ALLOWED[src]:
        return None
    return f"{imp.importer} -> {imp.imported} ({src} -> {dst})"


def layer_violations() -> set[str]:
    return {v for imp in graph() if counted(imp) and (v := violation(imp))}


def cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    edges: dict[str, set[str]] = {}
    for imp in graph():
        if counted(imp) and not imp.imported.startswith(NOT_WALKED):
            edges.setdefault(imp.importer, set()).add(imp.imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    return found


def test_the_walk_sees_the_product() -> None:
    names = {module_name(p) for p in product_files()}
    assert {"gpuhost.core.context", "gpuhost.facts.host", "gpuhost.operations.lxc", "gpuhost.cli"} <= names
    assert not any(n.startswith(NOT_WALKED) for n in names)
    for n in names:
        layer_of(n)


def test_lazy_and_type_checking_imports_are_seen() -> None:
    modules = all_modules()
    found = {i.imported: i for i in imports_of(PKG / "operations" / "lxc.py", modules)}
    assert found["gpuhost.core.context"].type_checking
    assert not found["gpuhost.facts.pve"].type_checking
    lazy = {i.imported for i in imports_of(PKG / "runner" / "context.py", modules)}
    assert "gpuhost.connection.pct" in lazy  # imported inside RunnerHost.guest


@pytest.mark.parametrize(
    ("importer", "imported", "tc", "bad"),
    [
        ("gpuhost.facts.host", "gpuhost.connection.base", False, True),  # facts beside connection
        ("gpuhost.connection.pct", "gpuhost.facts.files", False, True),
        ("gpuhost.pve.api", "gpuhost.facts.pve", False, True),  # pve.api is a connection
        ("gpuhost.facts.pve", "gpuhost.pve.config", False, False),  # pve.config is at the facts level
        ("gpuhost.operations.lxc", "gpuhost.connection.base", False, True),
        ("gpuhost.operations.lxc", "gpuhost.runner.context", True, True),  # TYPE_CHECKING counts
        ("gpuhost.checks.host", "gpuhost.operations.boot", False, True),
        ("gpuhost.templating", "gpuhost.core.facts", False, True),  # base imports no layer
        ("gpuhost.runner.run", "gpuhost.templating", False, False),
        ("gpuhost.p2p.remote", "gpuhost.runner.run", False, True),
        ("gpuhost.bench_serving.parse", "gpuhost.cli.app", False, True),
        ("gpuhost.p2p.remote", "gpuhost.connection.base", False, False),
        ("gpuhost.roles.base", "gpuhost.lab.manager", False, True),
        ("gpuhost.cli.lab", "gpuhost.lab.manager", False, False),
    ],
)
def test_the_rules(importer: str, imported: str, tc: bool, bad: bool) -> None:
    imp = Import(importer, imported, 1, tc)
    assert (counted(imp) and violation(imp) is not None) is bad


def test_type_checking_may_name_the_core_protocol() -> None:
    assert not counted(Import("gpuhost.templating", CORE_PROTOCOL, 1, True))
    assert counted(Import("gpuhost.templating", CORE_PROTOCOL, 1, False))


def test_no_import_cycle() -> None:
    found = cycles()
    new = [c for c in found if c not in KNOWN_CYCLES]
    gone = [c for c in KNOWN_CYCLES if c not in found]
    assert not new, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in new)
    assert not gone, f"fixed (delete them from KNOWN_CYCLES): {gone}"


def test_shipped_programs_stand_alone() -> None:
    modules = all_modules()
    bad = []
    for pkg in ("gpuhost.probe", "gpuhost.tools"):
        for path in sorted((SRC / pkg.replace(".", "/")).rglob("*.py")):
            bad += [
                f"{i.importer} -> {i.imported}" for i in imports_of(path, modules) if not i.imported.startswith(pkg)
            ]
    assert bad == []


def test_layer_order() -> None:
    found = layer_violations()
    new = sorted(found - KNOWN)
    gone = sorted(KNOWN - found)
    assert not new, "imports against the layer order:\n" + "\n".join(new)
    assert not gone, "fixed (delete them from KNOWN):\n" + "\n".join(gone)
