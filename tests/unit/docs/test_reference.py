"""The runbook site's generated pages against the registries they are generated from."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def gen():
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "scripts" / "gen_reference.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gen_reference"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def pages(gen):
    return gen.pages()


def test_every_field_and_operation_is_described(gen):
    assert gen.undescribed() == []


def test_every_check_has_a_troubleshooting_entry_with_meaning_and_fix(gen, pages):
    registry = gen.import_all_checks()
    text = pages["troubleshooting.md"]
    entries = dict(re.findall(r"^### .+ \{#([^}]+)\}\n\nCheck `([^`]+)`\.", text, re.M))
    assert sorted(entries.values()) == sorted(registry)
    for name, info in registry.items():
        assert entries[gen.anchor(name)] == name
        section = text.split("{#" + gen.anchor(name) + "}", 1)[1].split("\n### ", 1)[0]
        assert " ".join(info.meaning.split()) in " ".join(section.split())
        assert " ".join(info.fix.split()) in " ".join(section.split())


def test_registry_walk_finds_checks_outside_the_catalog(gen):
    # checks registered far from gpuhost.checks (P2P judge, bench, serve rules, log signatures)
    groups = {i.group for i in gen.import_all_checks().values()}
    assert {"host", "container", "p2p", "bench", "serve", "sglang-log"} <= groups
    from gpuhost.serve.logscan.signatures import SIGNATURES

    text = gen.pages()["troubleshooting.md"]
    for sig in SIGNATURES:
        for pattern in sig.patterns:
            assert pattern.pattern.replace("`", "\\`") in text


def test_every_host_check_of_the_registry_says_when_it_runs(gen, pages):
    from gpuhost.checks.table import CONTAINER_CHECKS, HOST_CHECKS

    text = pages["troubleshooting.md"]
    for entry in HOST_CHECKS:
        section = text.split("{#" + gen.anchor(entry.name) + "}", 1)[1].split("\n### ", 1)[0]
        assert f"**When it runs.** On every node expected to show {entry.wanted}." in section
    for ct_entry in CONTAINER_CHECKS:
        section = text.split("{#" + gen.anchor(ct_entry.name) + "}", 1)[1].split("\n### ", 1)[0]
        assert f"**When it runs.** In every GPU container expected to show {ct_entry.wanted}." in section


def test_every_operation_and_its_arguments_are_on_the_operations_page(pages):
    from gpuhost.operations.table import OPERATIONS

    text = pages["reference/operations.md"]
    for kind, op in OPERATIONS.items():
        section = text.split(f"## `{kind}` {{#", 1)[1].split("\n## ", 1)[0]
        for name, field in op.Args.model_fields.items():
            row = next(line for line in section.splitlines() if line.startswith(f"| `{field.alias or name}` |"))
            assert " ".join(field.description.split()).replace("|", "\\|") in row


def test_every_role_variable_is_on_the_roles_page(pages):
    from gpuhost.roles.table import ROLES

    text = pages["reference/roles.md"]
    for rname, role in ROLES.items():
        section = text.split(f"## `{rname}`", 1)[1].split("\n## ", 1)[0]
        for name in role.Vars.model_fields:
            assert f"| `{name}` |" in section


def test_inventory_page_covers_the_document_down_to_containers(gen, pages):
    names = [m.__name__ for m in gen.inventory_models()]
    assert names[0] == "InventoryFile"
    assert {"NodeSpec", "SSHConfig", "APIConfig", "ContainerSpec", "GroupSpec"} <= set(names)
    assert "| `host_key_policy` | 'strict' \\| 'accept-new' | `\"strict\"` |" in pages["reference/inventory.md"]


def test_cli_page_lists_every_command(pages):
    import typer
    from typer import _click as tclick

    from gpuhost.cli.app import _register, app

    _register([])  # every command module, whatever this process was started with
    root = typer.main.get_command(app)
    ctx = tclick.core.Context(root, info_name="gpuhost")
    text = pages["reference/cli.md"]
    for name in root.list_commands(ctx):
        sub = root.get_command(ctx, name)
        assert f"`gpuhost {name}`" in text
        if hasattr(sub, "list_commands"):
            sub_ctx = tclick.core.Context(sub, info_name=name, parent=ctx)
            for leaf in sub.list_commands(sub_ctx):
                assert f"`gpuhost {name} {leaf}`" in text
    assert "`-i, --inventory FILE`" in text and "<str>" not in text and "<path>" not in text


def test_errors_page_has_every_error_class_and_its_exit_code(pages):
    from gpuhost import errors
    from gpuhost.cli.failures import INTERNAL_ERROR

    text = pages["reference/errors.md"]
    for obj in vars(errors).values():
        if isinstance(obj, type) and issubclass(obj, errors.GpuhostError):
            assert f"{obj.__name__} (exit {obj.exit_code})" in text
    assert f"| `{INTERNAL_ERROR}` |" in text


def test_every_schema_is_on_the_schemas_page(gen, pages):
    import json

    files = gen.schema_files()
    assert {f.name for f in files} >= {
        "run-report.schema.json",
        "verify-p2p.schema.json",
        "bench-sglang.schema.json",
    }
    for f in files:
        doc = json.loads(f.read_text())
        assert f"## {doc['title']}" in pages["reference/schemas.md"]
        for key in doc.get("properties", {}):
            assert f"| `{key}` |" in pages["reference/schemas.md"]


def test_generated_pages_are_not_committed_copies(pages):
    for path in pages:
        assert not (ROOT / "docs" / path).exists(), f"docs/{path} is generated at build time; delete the copy"


def nav_pages(entry: object) -> set[str]:
    """Every page the ``nav`` of mkdocs.yml lists (its YAML, so a commented line lists nothing)."""
    if isinstance(entry, str):
        return {entry}
    if isinstance(entry, list):
        return set().union(*(nav_pages(e) for e in entry))
    if isinstance(entry, dict):
        return set().union(*(nav_pages(v) for v in entry.values()))
    return set()


def test_every_guide_is_in_the_nav():
    from ruamel.yaml import YAML

    nav = nav_pages(YAML(typ="safe").load((ROOT / "mkdocs.yml").read_text())["nav"])
    missing = sorted(page.name for page in (ROOT / "docs").glob("*.md") if page.name not in nav)
    assert missing == [], f"not in the mkdocs.yml nav: {missing}"


def test_nav_pages_reads_yaml_not_comments():
    text = "nav:\n  - Home: index.md\n  - Guides:\n      - A: a.md\n      # - B: b.md\n"
    from ruamel.yaml import YAML

    assert nav_pages(YAML(typ="safe").load(text)["nav"]) == {"index.md", "a.md"}


def test_troubleshooting_starts_with_what_the_operator_sees(pages):
    text = pages["troubleshooting.md"]
    # the trap: the page titled "by symptom" was ordered by check name
    assert text.index("## By symptom") < text.index("## Host checks")
    symptoms = text[text.index("## By symptom") : text.index("## Host checks")]
    rows = re.findall(r"^\| (.+?) \| (\[`.+)\|$", symptoms, re.M)
    assert len(rows) >= 10
    anchors = set(re.findall(r"\{#([\w.-]+)\}", text))
    for _symptom, links in rows:
        for target in re.findall(r"\]\(#([\w.-]+)\)", links):
            assert target in anchors, f"{target} has no section on the page"
    assert any("answers are wrong, NaN" in symptom for symptom, _ in rows)
