"""Which reads are quick: a file's content, mode or existence, a line of ``/proc``.

A batch of reads (:func:`gpuhost.runner.prefetch.batch_command`) runs slow programs (``pveversion``, ``pct
config``, ``nvidia-smi``) at once, each writing into files of a temporary folder, which costs a few programs more
(``mktemp``, ``stat``, ``cat``, ``rm``) than the reads themselves. A quick read is over sooner than those: the
batch runs it in turn, its output straight into the batch's own. A command is quick only if it is exactly what one
of the facts below makes, for whatever path: nothing else is guessed at.
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


def is_quick(command: str) -> bool:
    """``command`` is exactly a quick fact's read (a file's content, mode or existence; a line of ``/proc``)."""
    if command in _constant():
        return True
    for pattern, make in _patterns():
        m = pattern.fullmatch(command)
        if m is None:
            continue
        try:
            words = shlex.split(m["q"])
        except ValueError:
            continue
        if len(words) == 1 and make(words[0]) == command:
            return True
    return False
