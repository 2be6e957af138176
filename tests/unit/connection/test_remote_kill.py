"""The session line every command gpuhost sends prints first on stderr (connection/remote_kill.py)."""

from __future__ import annotations

from gpuhost.connection import remote_kill


def test_the_session_line_is_found_and_removed_when_it_comes_first() -> None:
    assert remote_kill.split_sid("gpuhost-sid 4242 987654\nerr\n") == (("4242", "987654"), "err\n")


def test_the_session_line_is_found_after_what_the_login_printed_first() -> None:
    """With ``become``, sudo may warn before the command runs: the session is still known (a timed-out command
    can then be killed), and the warning stays in the command's stderr."""
    warning = "sudo: unable to resolve host node7: Name or service not known\n"
    assert remote_kill.split_sid(warning + "gpuhost-sid 12 34\nerr\n") == (("12", "34"), warning + "err\n")


def test_no_session_line_leaves_stderr_as_it_was() -> None:
    for stderr in ("", "err\n", "x gpuhost-sid 1 2\n", "gpuhost-sid 1\n", "gpuhost-sid 1 2"):
        assert remote_kill.split_sid(stderr) == (None, stderr)
