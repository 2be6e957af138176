"""``gpuhost doc``: the operation reference on the command line (as ansible-doc)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpuhost.cli.app import _register, app, main
from gpuhost.operations.table import KINDS

_register([])
runner = CliRunner()


def test_an_operation_page_names_its_arguments_defaults_and_a_skeleton():
    r = runner.invoke(app, ["doc", "systemd"])
    assert r.exit_code == 0, r.output
    page = r.output
    assert page.startswith("systemd (gpuhost.operations.systemd.Systemd)\n")
    assert "  unit  (str; required)\n      the unit name, e.g. nvidia-persistenced.service\n" in page
    assert '  state  ("started" | "stopped" | "restarted" | null; default: null)\n' in page
    assert "  daemon_reload  (bool; default: false)\n" in page
    assert "EXAMPLE\n  - name: …\n    systemd:\n      unit: …  # str\n" in page


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_operation_has_a_page(kind: str):
    r = runner.invoke(app, ["doc", kind, "--json"])
    assert r.exit_code == 0, r.output
    ref = json.loads(r.output)
    assert ref["operation"] == kind and ref["doc"], f"{kind} has no description"
    assert f"  {kind}:" in ref["example"]


def test_the_list_has_every_operation_and_a_typo_gets_a_suggestion(capsys: pytest.CaptureFixture[str]):
    listed = runner.invoke(app, ["doc"]).output.splitlines()
    assert [ln.split()[0] for ln in listed] == sorted(KINDS)
    with pytest.raises(SystemExit) as exc:
        main(["doc", "systmd"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip() == "error: no operation 'systmd'; did you mean systemd?"
