"""Silent no-ops are errors, and ``-e KEY=VALUE`` keeps VALUE a string (issue 32, items 4 and 5).

``launch sglang`` with no ``serve:`` entry, a ``--limit`` that selects no host of the plays and a
``--start-at-task`` no task has used to print ``0 tasks`` and exit 0.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhost.cli.playbook_run import parse_extra_vars
from gpuhost.errors import ConfigError, UsageError
from gpuhost.inventory.loader import load_inventory
from gpuhost.playbook.loader import load_playbook
from gpuhost.runner.run import RunOptions, run_playbook
from tests.support.local import local_inventory
from tests.unit.cli.test_malformed_input import Listener, _run, _write, inventory_text


@pytest.fixture(scope="module")
def listener() -> Listener:
    return Listener()


def test_launch_with_no_serve_entry_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listener: Listener
) -> None:
    inv = inventory_text(listener.port, node_extra="    containers:\n      200: {hostname: llm}\n")
    before = listener.accepted
    code, out = _run(capsys, ["launch", "sglang", "-i", str(_write(tmp_path, "inventory.yml", inv))])
    assert code == 2, out
    assert "nothing to launch" in out and "serve:" in out and "0 tasks" not in out, out
    assert listener.accepted == before


def test_limit_selecting_no_host_of_the_plays_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listener: Listener
) -> None:
    inv = (
        f"nodes:\n  pve1: {{address: 127.0.0.1, ssh: {{port: {listener.port}}}}}\n"
        f"  pve2: {{address: 127.0.0.1, ssh: {{port: {listener.port}}}}}\n"
    )
    book = _write(tmp_path, "play.yml", "- hosts: pve1\n  tasks:\n    - command: 'true'\n")
    before = listener.accepted
    code, out = _run(capsys, ["run", str(book), "-i", str(_write(tmp_path, "inventory.yml", inv)), "--limit", "pve2"])
    assert code == 2, out
    assert "--limit 'pve2' selects no host" in out and "hosts: pve1" in out, out
    assert listener.accepted == before


def test_mistyped_start_at_task_with_roles_is_an_error_and_runs_nothing(tmp_path: Path) -> None:
    made = tmp_path / "made"
    book = tmp_path / "play.yml"
    book.write_text(f"- hosts: all\n  roles: [sglang]\n  tasks:\n    - name: touch it\n      command: 'touch {made}'\n")
    inv = load_inventory(local_inventory(tmp_path, ["h1"]))
    with pytest.raises(UsageError, match="--start-at-task 'tuch it': no task of that name") as info:
        run_playbook(load_playbook(book), inv, RunOptions(start_at_task="tuch it"))
    assert info.value.exit_code == 2
    assert not made.exists()


def test_start_at_task_that_exists_still_runs(tmp_path: Path) -> None:
    made = tmp_path / "made"
    book = tmp_path / "play.yml"
    book.write_text(f"- hosts: all\n  roles: [sglang]\n  tasks:\n    - name: touch it\n      command: 'touch {made}'\n")
    inv = load_inventory(local_inventory(tmp_path, ["h1"]))
    report = run_playbook(load_playbook(book), inv, RunOptions(start_at_task="touch it"))
    assert report.exit_code == 0 and made.exists()


@pytest.mark.parametrize(
    ("pair", "value"),
    [
        ("mode=0644", "0644"),
        ("flag=true", "true"),
        ("colon=:", ":"),
        ("n=1.10", "1.10"),
        ("empty=", ""),
        ("x=a=b", "a=b"),
    ],
)
def test_key_value_keeps_the_value_a_string(pair: str, value: str) -> None:
    out, _ = parse_extra_vars([pair])
    assert out == {pair.split("=", 1)[0]: value}


def test_json_mapping_gives_typed_values() -> None:
    out, origins = parse_extra_vars(['{"lxc_ctids": [200, 201], "allow": true, "mode": "0644"}'])
    assert out == {"lxc_ctids": [200, 201], "allow": True, "mode": "0644"}
    assert set(origins) == {"lxc_ctids", "allow", "mode"}


@pytest.mark.parametrize("text", ['{"a": 1', '{"not a name": 1}', "[1, 2]"])
def test_bad_json_is_a_config_error_naming_the_option(text: str) -> None:
    with pytest.raises(ConfigError, match="-e:1"):
        parse_extra_vars([text])
