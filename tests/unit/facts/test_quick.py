"""Which reads a batch runs in turn (facts/quick.py): exactly the commands the quick facts make, for any path."""

from __future__ import annotations

import pytest

from gpuhost.facts import files, pve, quick, system, systemd


@pytest.mark.parametrize("path", ["/etc/modules", "/etc/a b", "/etc/it's", "/tmp/$(reboot)", "/x;y", "-n"])
def test_each_file_facts_read_of_any_path_is_quick(path: str) -> None:
    for fact in (files.content, files.exists, files.mode, files.content_and_mode):
        assert quick.is_quick(fact.command(path)), fact.command(path)


def test_the_proc_and_systemd_reads_are_quick() -> None:
    assert all(quick.is_quick(f.command()) for f in (system.boot_id, system.proc_cmdline, systemd.systemd_running))


@pytest.mark.parametrize(
    "command",
    [
        pve.pve_version.command(),
        files.content.command("/etc/x") + "; reboot",
        "test -e /a; reboot",
        "test -e /a /b",
        "[ -e /a ] || exit 44; stat -L -c %a -- /a && cat -- /b",  # two different paths
        files.checksum.command("/etc/x"),  # reads a whole file of any size through sha256sum
        "cat /proc/cmdline; true",
    ],
)
def test_anything_else_is_not(command: str) -> None:
    assert not quick.is_quick(command)


@pytest.mark.parametrize("path", ["/etc/modules", "/etc/a b", "/etc/it's", "/tmp/$(reboot)", "-n"])
def test_a_file_read_names_its_path_and_whether_it_reads_the_mode(path: str) -> None:
    assert quick.file_read(files.content.command(path)) == (path, False)
    assert quick.file_read(files.content_and_mode.command(path)) == (path, True)
    assert quick.file_read(files.exists.command(path)) is None
    assert quick.file_read(files.mode.command(path)) is None


def test_bare_reads_are_the_single_commands_that_cannot_exit_the_shell() -> None:
    for command in (files.exists.command("/a b"), files.mode.command("/x"), system.boot_id.command()):
        assert quick.is_bare(command), command
    for command in (
        files.content.command("/x"),  # ends its shell with exit 44 when missing
        files.content_and_mode.command("/x"),
        "test -e /a; exit 3",
        "cd /tmp",
    ):
        assert not quick.is_bare(command), command
