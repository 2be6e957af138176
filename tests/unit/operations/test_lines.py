import pytest

from gpuhost.errors import OperationFailed
from gpuhost.operations.lines import Line, edit_lines
from tests.support.local import local_host


def test_edit_lines_appends_once_and_keeps_everything_else():
    text = "# comment\nfoo\n"
    once = edit_lines(text, "bar", None, "present")
    assert once == "# comment\nfoo\nbar\n"
    assert edit_lines(once, "bar", None, "present") == once


def test_edit_lines_regexp_replaces_last_match():
    text = "A=1\nB=2\nA=3\n"
    assert edit_lines(text, "A=9", r"^A=", "present") == "A=1\nB=2\nA=9\n"


def test_edit_lines_absent_by_regexp():
    assert edit_lines("x\nblacklist nouveau\ny\n", None, "nouveau", "absent") == "x\ny\n"


def test_line_plan_then_apply_then_nothing(tmp_path):
    f = tmp_path / "motd"
    f.write_text("hello\n")
    host = local_host()
    op = Line.from_dict({"path": str(f), "line": "managed"})
    plan = op.plan(host)
    assert plan.changes and "+managed" in plan.diff
    host.conn.write_file(str(f), plan.actions[0].content)
    host.invalidate_facts()
    assert not Line.from_dict({"path": str(f), "line": "managed"}).plan(host).changes


def test_line_missing_file_without_create_fails(tmp_path):
    with pytest.raises(OperationFailed, match="set create: true"):
        Line.from_dict({"path": str(tmp_path / "x"), "line": "a"}).plan(local_host())


def test_line_rejects_multiline_and_bad_regexp():
    with pytest.raises(ValueError, match="single line"):
        Line.from_dict({"path": "/x", "line": "a\nb"})
    with pytest.raises(ValueError, match="invalid regular expression"):
        Line.from_dict({"path": "/x", "regexp": "("})
