from pathlib import Path

import pytest

from gpuhost.errors import PlaybookError
from gpuhost.playbook.loader import load_playbook

REPO = Path(__file__).resolve().parents[3]


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "play.yml"
    p.write_text(text)
    return p


def test_example_playbook_loads():
    book = load_playbook(REPO / "playbooks" / "example.yml")
    play = book.plays[0]
    assert play.hosts == "all"
    assert [t.kind for t in play.tasks] == ["module_list", "copy", "line"]
    # safe on an LXC host: nothing in the example binds GPUs to vfio-pci at the next boot
    assert all("vfio-pci ids=" not in str(t.args) and "vfio_ids" not in str(t.args) for t in play.tasks)
    assert "vfio_ids" not in play.vars.values
    assert play.tasks[0].notify == ("update initramfs",)
    assert [h.name for h in play.handlers] == ["update initramfs"]


@pytest.mark.parametrize(
    ("text", "line", "field", "msg"),
    [
        ("- hosts: all\n  tasks:\n    - name: x\n      lineinfile: {path: /a}\n", 4, "lineinfile", "unknown operation"),
        (
            "- hosts: all\n  tasks:\n    - name: x\n      line:\n        path: /a\n        lin: b\n",
            6,
            "line.lin",
            "unknown field",
        ),
        (
            "- hosts: all\n  tasks:\n    - copy: {dest: /a, content: x}\n      command: {cmd: y}\n",
            3,
            None,
            "exactly one operation",
        ),
        ("- tasks: []\n", 1, "hosts", "needs 'hosts'"),
        ("- hosts: all\n  taks: []\n", 2, "taks", "unknown field"),
        ("- hosts: all\n  roles: [no_such_role]\n", 2, "roles", "unknown role 'no_such_role'"),
        ("- hosts: all\n  tasks:\n    - copy: {dest: /a, content: x, mode: rw}\n", 3, "copy.mode", "octal mode"),
    ],
)
def test_bad_playbook_names_line_and_field(tmp_path, text, line, field, msg):
    path = write(tmp_path, text)
    with pytest.raises(PlaybookError) as info:
        load_playbook(path)
    err = info.value
    assert err.exit_code == 2
    assert err.line == line
    assert err.field == field
    assert msg in str(err)


def test_templated_arguments_are_validated_per_host_not_at_load(tmp_path):
    path = write(tmp_path, "- hosts: all\n  tasks:\n    - copy: {dest: '{{ d }}', content: x}\n")
    assert load_playbook(path).plays[0].tasks[0].templated
