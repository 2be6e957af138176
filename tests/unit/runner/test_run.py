import hashlib
from pathlib import Path

import pytest

from gpuhost.inventory.loader import load_inventory
from gpuhost.playbook.loader import load_playbook
from gpuhost.runner.run import RunOptions, run_playbook
from tests.support.local import local_inventory


def playbook(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "play.yml"
    p.write_text(body)
    return p


def test_changes_once_then_converges_and_handler_runs_once(tmp_path):
    d = tmp_path / "etc"
    d.mkdir()
    book = playbook(
        tmp_path,
        f"""
- hosts: all
  tasks:
    - name: a
      line: {{path: {d}/a, line: one, create: true}}
      notify: count
    - name: b
      module_list: {{path: {d}/modules, modules: [vfio]}}
      notify: count
  handlers:
    - name: count
      command: "echo ran >> {d}/handler.log"
""",
    )
    inv = load_inventory(local_inventory(tmp_path, ["h1"]))
    first = run_playbook(load_playbook(book), inv)
    assert first.exit_code == 0
    assert first.hosts["h1"].changed == 3  # two tasks and the handler
    assert (d / "handler.log").read_text() == "ran\n"
    second = run_playbook(load_playbook(book), inv)
    assert second.hosts["h1"].changed == 0 and second.hosts["h1"].ok == 2
    assert (d / "handler.log").read_text() == "ran\n"


def digest(root: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def test_check_mode_changes_nothing_but_reports_diffs(tmp_path):
    d = tmp_path / "etc"
    d.mkdir()
    (d / "modules").write_text("# header\n")
    book = playbook(
        tmp_path,
        f"""
- hosts: all
  tasks:
    - module_list: {{path: {d}/modules, modules: [vfio]}}
      notify: touch
    - command: {{cmd: "touch {d}/made", creates: "{d}/made"}}
  handlers:
    - name: touch
      command: "touch {d}/handler"
""",
    )
    inv = load_inventory(local_inventory(tmp_path, ["h1"]))
    before = digest(tmp_path)
    report = run_playbook(load_playbook(book), inv, RunOptions(check=True))
    assert digest(tmp_path) == before
    statuses = [(r.operation, r.status) for r in report.results]
    assert statuses == [("module_list", "changed"), ("command", "changed"), ("command", "changed")]
    assert "+vfio" in report.results[0].diff


def test_failing_host_stops_alone(tmp_path):
    book = playbook(
        tmp_path,
        """
- hosts: all
  tasks:
    - command: {cmd: 'test "{{ inventory_hostname }}" != bad'}
    - command: {cmd: "true"}
""",
    )
    report = run_playbook(load_playbook(book), load_inventory(local_inventory(tmp_path, ["good", "bad"])))
    assert report.exit_code == 1
    assert report.hosts["good"].changed == 2 and report.hosts["good"].failed == 0
    assert report.hosts["bad"].failed == 1 and report.hosts["bad"].changed == 0
    failed = [r for r in report.results if r.status == "failed"][0]
    assert "exit 1" in failed.error and 'test "bad" != bad' in failed.error


def test_tags_and_limit(tmp_path):
    book = playbook(
        tmp_path,
        f"""
- hosts: all
  tasks:
    - command: {{cmd: "touch {tmp_path}/{{{{ inventory_hostname }}}}-a"}}
      tags: [a]
    - command: {{cmd: "touch {tmp_path}/{{{{ inventory_hostname }}}}-b"}}
      tags: [b]
""",
    )
    inv = load_inventory(local_inventory(tmp_path, ["h1", "h2"]))
    run_playbook(load_playbook(book), inv, RunOptions(tags=frozenset({"a"}), limit="h2"))
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("h")) == ["h2-a"]


def test_reboot_is_never_done_without_consent(tmp_path):
    book = playbook(
        tmp_path,
        """
- hosts: all
  tasks:
    - reboot: {reason: kernel command line changed}
""",
    )
    report = run_playbook(load_playbook(book), load_inventory(local_inventory(tmp_path, ["h1"])))
    r = report.results[0]
    assert r.status == "skipped" and "--allow-reboot" in r.reason
    assert report.hosts["h1"].reboot_required is True
    assert report.exit_code == 0


def test_extra_vars_override_everything(tmp_path):
    book = playbook(
        tmp_path,
        f"""
- hosts: all
  vars: {{name: play}}
  tasks:
    - copy: {{dest: "{tmp_path}/out", content: "{{{{ name }}}}"}}
""",
    )
    run_playbook(
        load_playbook(book),
        load_inventory(local_inventory(tmp_path, ["h1"], {"name": "inv"})),
        RunOptions(extra_vars={"name": "cli"}),
    )
    assert (tmp_path / "out").read_text() == "cli"


def test_flush_handlers_runs_notified_handlers_at_that_point(tmp_path):
    log = tmp_path / "log"
    book = playbook(
        tmp_path,
        f"""
- hosts: all
  tasks:
    - command: {{cmd: "echo task1 >> {log}"}}
      notify: h
    - meta: flush_handlers
    - command: {{cmd: "echo task2 >> {log}"}}
      notify: h
  handlers:
    - name: h
      command: "echo handler >> {log}"
""",
    )
    run_playbook(load_playbook(book), load_inventory(local_inventory(tmp_path, ["h1"])))
    assert log.read_text().split() == ["task1", "handler", "task2", "handler"]


def test_inventory_consent_allows_a_reboot_only_for_that_host(tmp_path):
    book = playbook(
        tmp_path,
        """
- hosts: all
  tasks:
    - reboot: {reason: test}
""",
    )
    inv_path = local_inventory(tmp_path, ["h1"])
    inv_path.write_text(inv_path.read_text().replace("connection: local", "connection: local\n    allow_reboot: true"))
    report = run_playbook(load_playbook(book), load_inventory(inv_path))
    # consent given: the runner tries, and refuses only because it will never reboot its own machine
    assert report.results[0].status == "failed"
    assert "the machine gpuhost runs on" in report.results[0].error


@pytest.mark.parametrize("where", ["inventory vars", "play vars", "-e"])
def test_consent_never_comes_from_variables(tmp_path, where):
    book_text = "- hosts: all\n  tasks:\n    - reboot: {reason: test}\n"
    if where == "play vars":
        book_text = "- hosts: all\n  vars: {allow_reboot: true}\n  tasks:\n    - reboot: {reason: test}\n"
    book = playbook(tmp_path, book_text)
    inv_path = local_inventory(tmp_path, ["h1"])
    if where == "inventory vars":
        inv_path.write_text(
            inv_path.read_text().replace("connection: local", "connection: local\n    vars: {allow_reboot: true}")
        )
    opts = RunOptions(extra_vars={"allow_reboot": True, "allow_restart": True} if where == "-e" else {})
    report = run_playbook(load_playbook(book), load_inventory(inv_path), opts)
    assert report.results[0].status == "skipped"
    assert "rerun with --allow-reboot" in report.results[0].reason
    assert report.hosts["h1"].reboot_required


def test_hosts_run_in_parallel_up_to_forks(tmp_path):
    # each host waits (bounded) for the other's marker: only concurrent hosts can both succeed
    book = playbook(
        tmp_path,
        f"""
- hosts: all
  tasks:
    - command:
        cmd: >-
          touch {tmp_path}/{{{{ inventory_hostname }}}}.up;
          for i in $(seq 1 40); do [ -e {tmp_path}/{{{{ peer }}}}.up ] && exit 0; sleep 0.05; done; exit 1
""",
    )
    inv_path = local_inventory(tmp_path, ["h1", "h2"])
    inv_path.write_text(
        inv_path.read_text()
        .replace(
            "  h1:\n    address: 127.0.0.1\n    connection: local",
            "  h1:\n    address: 127.0.0.1\n    connection: local\n    vars: {peer: h2}",
        )
        .replace(
            "  h2:\n    address: 127.0.0.1\n    connection: local",
            "  h2:\n    address: 127.0.0.1\n    connection: local\n    vars: {peer: h1}",
        )
    )
    inv = load_inventory(inv_path)
    assert run_playbook(load_playbook(book), inv, RunOptions(forks=2)).exit_code == 0
    for f in tmp_path.glob("*.up"):
        f.unlink()
    serial = run_playbook(load_playbook(book), inv, RunOptions(forks=1))
    assert serial.hosts["h1"].failed == 1  # alone, the first host waits in vain


def test_task_json_has_its_start_time_and_stderr(tmp_path):
    import calendar
    import json
    import re
    import time

    import jsonschema

    book = playbook(
        tmp_path,
        """
- hosts: all
  tasks:
    - name: warns
      command: "echo out; echo careful >&2"
    - name: breaks
      command: "echo broke >&2; exit 5"
""",
    )
    before = time.time()
    report = run_playbook(load_playbook(book), load_inventory(local_inventory(tmp_path, ["h1"])))
    doc = report.to_json()
    schema = json.loads((Path(__file__).resolve().parents[3] / "docs/schema/run-report.schema.json").read_text())
    jsonschema.validate(doc, schema)
    warns, breaks = doc["tasks"]
    assert warns["stdout"] == "out\n" and warns["stderr"] == "careful\n"
    assert breaks["status"] == "failed" and breaks["stderr"] == "broke\n"
    for t in (warns, breaks):
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", t["started_at"]), t["started_at"]
        started = calendar.timegm(time.strptime(t["started_at"][:19], "%Y-%m-%dT%H:%M:%S"))
        assert before - 1 <= started <= time.time() + 1
