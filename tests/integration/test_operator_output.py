"""What an operator sees from ``gpuhost run`` in logs and CI: plain piped output, ``--json-events``,
``--log``, listings, ``--limit`` patterns and the retry list, ``-e @vars.yml`` — against a real sshd host."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from tests.integration.conftest import write_inventory
from tests.integration.test_cli_run import node  # noqa: F401  (fixture)

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "playbooks" / "example.yml"
EVENTS = json.loads((REPO / "docs" / "schema" / "run-events.schema.json").read_text())
REPORT = json.loads((REPO / "docs" / "schema" / "run-report.schema.json").read_text())
BOX = re.compile("[\u2500-\u257f]")
LONG = "a task whose name is far longer than eighty columns so that any table cutting it to fit shows an ellipsis"


def gpuhost(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # what a pipe in CI gets
    return subprocess.run(
        [sys.executable, "-m", "gpuhost", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**base, "PYTHONPATH": str(REPO / "src"), **(env or {})},
        timeout=120,
    )


def long_playbook(tmp_path: Path) -> Path:
    book = tmp_path / "long.yml"
    book.write_text(
        "- name: long names\n  hosts: all\n  tasks:\n"
        f"    - name: {LONG}\n      command: {{cmd: 'true'}}\n      tags: [first]\n"
        "    - name: second task\n      line: {path: /etc/motd, line: managed-by-gpuhost, create: true}\n"
        "      tags: [motd]\n"
    )
    return book


def test_piped_output_has_no_box_drawing_and_cuts_nothing(node, tmp_path):  # noqa: F811
    host, inventory = node
    r = gpuhost("run", str(long_playbook(tmp_path)), "-i", str(inventory))
    assert r.returncode == 0, r.stdout + r.stderr
    assert not BOX.search(r.stdout), r.stdout
    assert "…" not in r.stdout and "\x1b[" not in r.stdout
    assert LONG in r.stdout
    recap = [line.split() for line in r.stdout.splitlines() if line.startswith("node1 ")]
    assert recap == [["node1", "0", "2", "0", "0"]], r.stdout


def test_json_events_stream_validates_line_by_line(node):  # noqa: F811
    host, inventory = node
    r = gpuhost("run", str(EXAMPLE), "-i", str(inventory), "--json-events", cwd=REPO)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    events = [json.loads(line) for line in lines]
    for event in events:
        jsonschema.validate(event, EVENTS)
    assert [e["event"] for e in events] == ["start", "task", "task", "task", "task", "end"]
    assert events[0]["hosts"] == ["node1"] and events[0]["playbook"] == "playbooks/example.yml"
    assert events[-1]["hosts"]["node1"]["changed"] == 4 and events[-1]["exit_code"] == 0
    assert [e["task"] for e in events[1:-1]][-1] == "update initramfs" and events[-2]["handler"] is True


def test_json_report_names_version_and_relative_playbook(node):  # noqa: F811
    from gpuhost import __version__

    host, inventory = node
    r = gpuhost("run", str(EXAMPLE), "-i", str(inventory), "--json", "--check", cwd=REPO)
    report = json.loads(r.stdout)
    jsonschema.validate(report, REPORT)
    assert report["gpuhost_version"] == __version__ and report["playbook"] == "playbooks/example.yml"


def test_command_stdout_shown_with_v_and_kept_in_json(node, tmp_path):  # noqa: F811
    host, inventory = node
    book = tmp_path / "out.yml"
    book.write_text("- hosts: all\n  tasks:\n    - name: say\n      command: {cmd: 'echo first; echo second'}\n")
    r = gpuhost("run", str(book), "-i", str(inventory), "-v")
    assert r.returncode == 0, r.stderr
    assert "    | first\n    | second\n" in r.stdout
    plain = gpuhost("run", str(book), "-i", str(inventory))
    assert "| first" not in plain.stdout
    report = json.loads(gpuhost("run", str(book), "-i", str(inventory), "--json").stdout)
    jsonschema.validate(report, REPORT)
    assert report["tasks"][0]["stdout"] == "first\nsecond\n"


def test_log_file_keeps_commands_tasks_and_recap_redacted(node, tmp_path):  # noqa: F811
    host, inventory = node
    token = "pve-token-1b2c3d4e-5f60-4718-9a0b-c1d2e3f4a5b6"
    book = tmp_path / "secret.yml"
    book.write_text(
        "- hosts: all\n  tasks:\n"
        "    - name: use the token\n      command: {cmd: \"echo {{ secret_env('GH_LOG_TOKEN') }} >/dev/null\"}\n"
        "    - name: boom\n      command: {cmd: 'echo broke >&2; exit 5'}\n"
    )
    log = tmp_path / "run.log"
    r = gpuhost("run", str(book), "-i", str(inventory), "--log", str(log), cwd=tmp_path, env={"GH_LOG_TOKEN": token})
    assert r.returncode == 1
    text = log.read_text()
    assert "=== gpuhost " in text and "--log" in text
    assert "[node1] changed      use the token" in text
    assert re.search(r"\[node1\] [0-9.]+s rc=5 \$ ", text), text
    assert "[node1] failed       boom" in text and "exit 5" in text and "broke" in text
    assert "node1 ok=0 changed=1 failed=1 skipped=0" in text
    assert token not in text and "1b2c3d4e" not in text
    assert token not in r.stdout + r.stderr


def test_failed_host_goes_to_the_retry_list_and_limit_at_file_reruns_it(node, tmp_path):  # noqa: F811
    host, _ = node
    inventory = write_inventory(tmp_path / "inv.yml", [host])
    inventory.write_text(
        inventory.read_text()
        + f"  ghost:\n    address: 127.0.8.250\n    ssh:\n      key_file: {host.client_key}\n"
        + f"      known_hosts_file: {host.known_hosts}\n"
        + "groups:\n  pve:\n    nodes: [node1, ghost]\n"
    )
    state = {"XDG_STATE_HOME": str(tmp_path / "state")}
    r = gpuhost("run", str(EXAMPLE), "-i", str(inventory), cwd=tmp_path, env=state)
    assert r.returncode == 1
    retry = tmp_path / "state" / "gpuhost" / "retry" / "example.retry"
    assert retry.read_text() == "ghost\n"
    assert f"rerun them with --limit @{retry}" in r.stderr
    assert list(tmp_path.glob("*.retry")) == []
    listed = gpuhost("run", str(EXAMPLE), "-i", str(inventory), "--limit", f"@{retry}", "--list-hosts")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[1:] == ["  ghost"]
    for pattern, hosts in (
        ("!ghost", ["node1"]),
        ("no*", ["node1"]),
        ("pve,!node1", ["ghost"]),
        ("all", ["node1", "ghost"]),
    ):
        r = gpuhost("run", str(EXAMPLE), "-i", str(inventory), "-l", pattern, "--list-hosts")
        assert r.returncode == 0, r.stderr
        assert [line.strip() for line in r.stdout.splitlines()[1:]] == hosts, pattern
    bad = gpuhost("run", str(EXAMPLE), "-i", str(inventory), "-l", "gpu*", "--list-hosts")
    assert bad.returncode == 2 and "'gpu*' matches no node or group" in bad.stderr


def test_list_tasks_tags_and_start_at_task(node, tmp_path):  # noqa: F811
    host, inventory = node
    book = long_playbook(tmp_path)
    tasks = gpuhost("run", str(book), "-i", str(inventory), "--list-tasks")
    assert tasks.returncode == 0, tasks.stderr
    assert tasks.stdout.splitlines() == [
        "play: long names",
        "  node1",
        f"    {LONG}  [first]",
        "    second task  [motd]",
    ]
    tags = gpuhost("run", str(book), "-i", str(inventory), "--list-tags")
    assert tags.stdout.strip() == "play: long names  tags: first, motd"
    assert not host.upper("/etc/motd").exists(), "a listing changed the host"
    r = gpuhost("run", str(book), "-i", str(inventory), "--start-at-task", "second task", "--json")
    report = json.loads(r.stdout)
    assert [t["task"] for t in report["tasks"]] == ["second task"]
    bad = gpuhost("run", str(book), "-i", str(inventory), "--start-at-task", "nope")
    assert bad.returncode == 2 and "no task of that name" in bad.stderr


def test_extra_vars_file_errors_name_its_line(node, tmp_path):  # noqa: F811
    host, inventory = node
    good = tmp_path / "vars.yml"
    good.write_text("# who runs this site\nmanaged_by: ops-team\n")
    r = gpuhost("run", str(EXAMPLE), "-i", str(inventory), "-e", f"@{good}", "--check", "--diff")
    assert r.returncode == 0, r.stderr
    assert "+This host is managed by ops-team (node1)." in r.stdout
    bad = tmp_path / "bad.yml"
    bad.write_text("vfio_ids: ['10de:2330']\n'not a name': 1\n")
    r = gpuhost("run", str(EXAMPLE), "-i", str(inventory), "-e", f"@{bad}")
    assert r.returncode == 2
    assert f"{bad}:2: field 'not a name'" in r.stderr


def test_inventory_graph(tmp_path):
    inv = tmp_path / "inv.yml"
    inv.write_text(
        "nodes:\n  pve1: {address: 127.0.8.1}\n  pve2: {address: 127.0.8.2}\n  pve3: {address: '::1'}\n"
        "groups:\n  gpu: {nodes: [pve1, pve2]}\n"
    )
    r = gpuhost("inventory", "-i", str(inv), "--graph")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "@all:",
        "  |--@gpu:",
        "  |  |--pve1",
        "  |  |--pve2",
        "  |--@ungrouped:",
        "  |  |--pve3",
    ]
