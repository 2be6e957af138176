"""Templates from playbooks and inventories render in a sandbox (issue 31, item 1).

A variable or template that reaches ``__globals__``/``os``/``popen`` is refused at load, exit 2 with file:line,
under ``run`` and ``--check``, and nothing runs on the controller; unbounded work (``range(10**9)``,
``'x'*10**10``) is refused; a Jinja runtime error (``1/0``, a ``%`` type error) is exit 2 with file:line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.cli.test_malformed_input import Listener, _run, _write, inventory_text


@pytest.fixture(scope="module")
def listener() -> Listener:
    return Listener()


def _popen(canary: Path) -> str:
    return f"{{{{ lipsum.__globals__.os.popen('touch {canary}').read() }}}}"


@pytest.mark.parametrize("check", [False, True], ids=["run", "check"])
def test_play_var_reaching_globals_is_refused_at_load_and_runs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listener: Listener, check: bool
) -> None:
    canary = tmp_path / "pwned"
    book = f'- hosts: all\n  vars:\n    a: "{_popen(canary)}"\n  tasks:\n    - copy: {{dest: /root/x, content: "{{{{ a }}}}"}}\n'
    inv = _write(tmp_path, "inventory.yml", inventory_text(listener.port))
    before = listener.accepted
    argv = ["run", str(_write(tmp_path, "play.yml", book)), "-i", str(inv), *(["--check"] if check else [])]
    code, out = _run(capsys, argv)
    assert code == 2, out
    assert "play.yml:3" in out and "field 'a'" in out and "__globals__" in out, out
    assert not canary.exists(), "the template ran a command on the controller"
    assert listener.accepted == before


def test_inventory_var_reaching_cycler_globals_is_refused_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listener: Listener
) -> None:
    canary = tmp_path / "pwned"
    top = f"vars:\n  b: \"{{{{ cycler.__init__.__globals__.os.system('touch {canary}') }}}}\"\n"
    inv = _write(tmp_path, "inventory.yml", inventory_text(listener.port, top=top))
    book = _write(tmp_path, "play.yml", "- hosts: all\n  tasks: []\n")
    code, out = _run(capsys, ["run", str(book), "-i", str(inv), "--check"])
    assert code == 2, out
    assert "inventory.yml:2" in out and "field 'b'" in out, out
    assert not canary.exists()


def test_template_file_reaching_globals_is_refused_at_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listener: Listener
) -> None:
    canary = tmp_path / "pwned"
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "evil.j2").write_text(f"line one\n{_popen(canary)}\n")
    book = _write(tmp_path, "play.yml", "- hosts: all\n  tasks:\n    - template: {src: evil.j2, dest: /root/x}\n")
    inv = _write(tmp_path, "inventory.yml", inventory_text(listener.port))
    code, out = _run(capsys, ["run", str(book), "-i", str(inv), "--check"])
    assert code == 2, out
    assert "play.yml:3" in out and "evil.j2" in out and "line 2" in out and "__globals__" in out, out
    assert not canary.exists()


@pytest.mark.parametrize(
    ("expr", "said"),
    [
        ("{{ range(10**9) | list | length }}", "range"),
        ("{{ 'x' * 10**10 }}", "longer than"),
        ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "loop iterations"),
        ("{{ 1 / 0 }}", "division by zero"),
        ("{{ '%d' % 'a' }}", "real number is required"),
        ("{{ '%0999999999d' % 1 }}", "format width"),
    ],
    ids=["range", "repeat", "nested-loops", "zero-division", "percent-type", "percent-width"],
)
def test_unbounded_or_failing_expression_is_exit_2_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listener: Listener, expr: str, said: str
) -> None:
    book = f'- hosts: all\n  vars:\n    x: 1\n    a: "{expr}"\n  tasks: []\n'
    inv = _write(tmp_path, "inventory.yml", inventory_text(listener.port))
    code, out = _run(capsys, ["run", str(_write(tmp_path, "play.yml", book)), "-i", str(inv), "--check"])
    assert code == 2, out
    assert "play.yml:4" in out and "field 'a'" in out and said in out, out
    assert "internal error" not in out


def test_ordinary_templates_still_render(tmp_path: Path) -> None:
    from gpuhost.templating import Templates

    t = Templates()
    text = "{% for i in range(3) %}{{ i }}{% else %}none{% endfor %} {{ '%s-%s' | format(1, 2) }} {{ 'a' ~ b }}"
    assert t.render_value(text, {"b": "B"}) == "012 1-2 aB"
    assert t.render_value("{{ [1, 2] | join(',') }} {{ 'x' * 3 }} {{ 2 ** 10 }}", {}) == "1,2 xxx 1024"
