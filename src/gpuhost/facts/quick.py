"""Which reads are quick: a file's content, mode or existence, a line of ``/proc``.

A batch of reads (:func:`gpuhost.runner.prefetch.batch_command`) runs slow programs (``pveversion``, ``pct
config``, ``nvidia-smi``) at once, each writing into files of a temporary folder, which costs a few programs more
(``mktemp``, ``stat``, ``cat``, ``rm``) than the reads themselves. A quick read is over sooner than those: the
batch runs it in turn, its output straight into the batch's own. A command is quick only if it is exactly what one
of the facts below makes, for whatever path: nothing else is guessed at.

Two finer kinds of quick read let a batch spend fewer programs still. A *bare* read is one simple command that
leaves the shell running it as it was (no ``exit``, ``cd`` or assignment): the batch runs it without a subshell of
its own. A *file read* (a file's content, with or without its mode) can be read together with the batch's other
file reads: one ``stat`` and one ``cat`` for all of them.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from functools import lru_cache

from gpuhost.facts import files, system, systemd

#: a path as :func:`shlex.quote` writes it: bare safe characters, or single-quoted with ``'"'"'`` for a quote
_QUOTED = r"(?:[\w@%+=:,./-]+|'(?:[^']|'\"'\"')*')"
_PLACEHOLDER = "\x00"

#: facts of one path whose command is quick
_PATH_FACTS: tuple[Callable[[str], str], ...] = (
    files.content.command,
    files.exists.command,
    files.mode.command,
    files.content_and_mode.command,
)


#: file facts whose command is one simple command (:func:`is_bare`)
_BARE_FACTS: tuple[Callable[[str], str], ...] = (files.exists.command, files.mode.command)


@lru_cache(maxsize=1)
def _patterns() -> list[tuple[re.Pattern[str], Callable[[str], str]]]:
    found = []
    for make in _PATH_FACTS:
        parts = make(_PLACEHOLDER).split(shlex.quote(_PLACEHOLDER))
        regex = re.escape(parts[0]) + f"(?P<q>{_QUOTED})" + "(?P=q)".join(re.escape(p) for p in parts[1:])
        found.append((re.compile(regex), make))
    return found


@lru_cache(maxsize=1)
def _constant() -> frozenset[str]:
    return frozenset(f.command() for f in (system.boot_id, system.proc_cmdline, systemd.systemd_running))


@lru_cache(maxsize=4096)
def _path_fact(command: str) -> tuple[Callable[[str], str], str] | None:
    """The file fact that makes exactly ``command``, and the path it reads (every node of a run asks about the same
    commands, several times: the answer is kept)."""
    for pattern, make in _patterns():
        m = pattern.fullmatch(command)
        if m is None:
            continue
        try:
            words = shlex.split(m["q"])
        except ValueError:
            continue
        if len(words) == 1 and make(words[0]) == command:
            return make, words[0]
    return None


def is_quick(command: str) -> bool:
    """``command`` is exactly a quick fact's read (a file's content, mode or existence; a line of ``/proc``)."""
    return command in _constant() or _path_fact(command) is not None


def is_bare(command: str) -> bool:
    """``command`` is a quick read that is one simple command: a file's existence or mode, a line of ``/proc``, the
    systemd check. Run in the batch's own shell it changes nothing there."""
    if command in _constant():
        return True
    found = _path_fact(command)
    return found is not None and found[0] in _BARE_FACTS


def file_read(command: str) -> tuple[str, bool] | None:
    """``(path, with_mode)`` when ``command`` is exactly a read of a file's content (``with_mode``: and its
    permission bits, through links, on a line before it); else None."""
    found = _path_fact(command)
    if found is None:
        return None
    make, path = found
    if make is files.content.command:
        return path, False
    if make is files.content_and_mode.command:
        return path, True
    return None
