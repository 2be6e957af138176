"""A failed command says what went wrong first; a long script is named by its first line only."""

from gpuhost.errors import CommandFailed


def test_cause_first_then_the_command_head():
    script = "set -eu\numask 077\ncat > /etc/x <<'EOF'\ncontent\nEOF\nmv /etc/x.tmp /etc/x"
    text = str(CommandFailed(script, 1, "", "mv: cannot move '/etc/x.tmp': Read-only file system\n", host="pve1"))
    first, second, *rest = text.splitlines()
    assert first == "pve1: command failed (exit 1): mv: cannot move '/etc/x.tmp': Read-only file system"
    assert second == "  command: set -eu … (+5 lines)"
    assert "content" not in text


def test_without_output_the_command_is_the_message():
    assert str(CommandFailed("false", 3, host="pve1")) == "pve1: command failed (exit 3): false"
