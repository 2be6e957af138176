import os
import stat

import pytest

from gpuhost.errors import TemplateError
from gpuhost.operations.files import Copy, Template, parse_mode
from gpuhost.runner.apply import apply
from tests.support.local import local_host


def test_parse_mode_accepts_octal_strings_and_yaml_ints():
    assert parse_mode("0644") == 0o644
    assert parse_mode(644) == 0o644
    with pytest.raises(ValueError):
        parse_mode("rw-r--r--")


def test_template_renders_with_strict_undefined(tmp_path):
    (tmp_path / "t.j2").write_text("ids={{ ids | join(',') }}\n")
    host = local_host(variables={"ids": ["10de:2bb5", "10de:22e8"]}, template_dir=tmp_path)
    dest = tmp_path / "out.conf"
    plan = Template.from_dict({"src": "t.j2", "dest": str(dest), "mode": "0600"}).plan(host)
    assert plan.reason.startswith("create")
    for action in plan.actions:
        apply(host, action)
    assert dest.read_text() == "ids=10de:2bb5,10de:22e8\n"
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600
    assert not Template.from_dict({"src": "t.j2", "dest": str(dest), "mode": "0600"}).plan(host).changes


def test_template_with_undefined_variable_fails_clearly(tmp_path):
    (tmp_path / "t.j2").write_text("{{ missing_var }}\n")
    host = local_host(template_dir=tmp_path)
    with pytest.raises(TemplateError, match="missing_var"):
        Template.from_dict({"src": "t.j2", "dest": str(tmp_path / "o")}).plan(host)


def test_copy_fixes_mode_only_when_content_is_right(tmp_path):
    f = tmp_path / "f"
    f.write_text("x\n")
    os.chmod(f, 0o644)
    host = local_host()
    plan = Copy.from_dict({"dest": str(f), "content": "x\n", "mode": "0600"}).plan(host)
    assert plan.changes and "mode" in plan.reason
    for action in plan.actions:
        apply(host, action)
    assert stat.S_IMODE(f.stat().st_mode) == 0o600 and f.read_text() == "x\n"


def test_relative_dest_is_refused():
    with pytest.raises(ValueError, match="absolute"):
        Copy.from_dict({"dest": "etc/x", "content": ""})
