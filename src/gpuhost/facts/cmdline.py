"""Kernel command lines: tokens, and the two files that hold them on Proxmox VE.

Edits keep every other token, in order, and every other line of the file untouched.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def token_key(token: str) -> str:
    return token.split("=", 1)[0]


#: Values that undo each other inside a comma-option token (``intel_iommu=on,igfx_off``).
_OPPOSITES = {"on": "off", "off": "on", "1": "0", "0": "1"}


def _options(token: str) -> list[str]:
    return token.split("=", 1)[1].split(",") if "=" in token else []


def satisfies(have: str, want: str) -> bool:
    """Whether token ``have`` already sets what ``want`` asks (``intel_iommu=on,igfx_off`` has ``intel_iommu=on``)."""
    if have == want:
        return True
    if "=" not in want or token_key(have) != token_key(want) or "=" not in have:
        return False
    return all(opt in _options(have) for opt in _options(want))


def merge_options(have: str, want: str) -> str:
    """``have`` with the options of ``want`` set, keeping the other sub-options in place.

    ``intel_iommu=off,igfx_off`` + ``intel_iommu=on`` -> ``intel_iommu=on,igfx_off``. A value
    without commas on either side (``iommu=pt`` over ``iommu=nopt``) is simply replaced.
    """
    opts = _options(have)
    wanted = _options(want)
    if len(opts) <= 1 and len(wanted) <= 1:
        return want
    for w in wanted:
        if w in opts:
            continue
        opposite = _OPPOSITES.get(w)
        if opposite in opts:
            opts[opts.index(opposite)] = w
        elif w in _OPPOSITES:
            opts.insert(0, w)
        else:
            opts.append(w)
    return f"{token_key(have)}={','.join(opts)}"


def edit_tokens(tokens: Sequence[str], present: Iterable[str], absent: Iterable[str] = ()) -> list[str]:
    """Tokens with each of ``present`` set and each of ``absent`` removed.

    A wanted token already there (or a comma-option token that already holds its options)
    leaves the line alone. A wanted ``key=value`` whose key is there with another value
    is merged into the last such token in place (the one the kernel acts on last), keeping
    its other sub-options; a wanted token with a new key, or a flag, is appended. Nothing
    else moves.
    """
    gone = set(absent)
    out = [t for t in tokens if t not in gone]
    for want in present:
        if any(satisfies(t, want) for t in out):
            continue
        key = token_key(want)
        same_key = [i for i, t in enumerate(out) if "=" in want and "=" in t and token_key(t) == key]
        if same_key:
            out[same_key[-1]] = merge_options(out[same_key[-1]], want)
        else:
            out.append(want)
    return out


def missing_tokens(have: Iterable[str], wanted: Iterable[str]) -> list[str]:
    have_list = list(have)
    return [t for t in wanted if not any(satisfies(h, t) for h in have_list)]


# -- /etc/kernel/cmdline (systemd-boot): exactly one line ------------------------------


def parse_kernel_cmdline_file(text: str) -> list[str]:
    """The tokens PVE boots from ``/etc/kernel/cmdline``: its first line, verbatim (proxmox-kernel-helper
    zz-proxmox-boot:49-51 ``CMDLINE=$(get_first_line /etc/kernel/cmdline)``, functions:114-125: the
    first line, comments not skipped). Later lines are ignored by PVE, so they are here."""
    first = text.split("\n", 1)[0]
    return first.split()


def render_kernel_cmdline_file(tokens: Sequence[str]) -> str:
    return " ".join(tokens) + "\n"


# -- /etc/default/grub: GRUB_CMDLINE_LINUX_DEFAULT="…" ----------------------------------

_ASSIGN = re.compile(r"^(?P<lead>\s*(?:export\s+)?)(?P<var>GRUB_CMDLINE_LINUX(?:_DEFAULT)?)=(?P<rest>.*)$")


@dataclass(frozen=True)
class GrubAssignment:
    var: str
    line_index: int
    lead: str
    quote: str  # '"', "'" or '' (unquoted)
    value: str
    trailer: str  # whatever followed the value on the line (a comment)

    @property
    def tokens(self) -> list[str]:
        return self.value.split()

    def render(self, tokens: Sequence[str]) -> str:
        value = " ".join(tokens)
        quote = self.quote or ('"' if len(tokens) != 1 else "")
        return f"{self.lead}{self.var}={quote}{value}{quote}{self.trailer}"


def _split_value(rest: str) -> tuple[str, str, str] | None:
    if rest[:1] in ('"', "'"):
        q = rest[0]
        i = 1
        while i < len(rest):
            if rest[i] == "\\" and q == '"':
                i += 2
                continue
            if rest[i] == q:
                return q, rest[1:i], rest[i + 1 :]
            i += 1
        return None  # unterminated (continues on the next line): not ours to touch
    m = re.match(r"^(\S*)(.*)$", rest)
    assert m
    return "", m.group(1), m.group(2)


def find_grub_assignment(text: str, var: str = "GRUB_CMDLINE_LINUX_DEFAULT") -> GrubAssignment | None:
    """The last active assignment of ``var`` (the one the shell keeps), or ``None``."""
    found = None
    for i, line in enumerate(text.splitlines()):
        m = _ASSIGN.match(line)
        if not m or m.group("var") != var:
            continue
        split = _split_value(m.group("rest"))
        if split is None:
            raise ValueError(f"line {i + 1}: {var} spans several lines; edit it by hand or use the drop-in")
        quote, value, trailer = split
        found = GrubAssignment(var, i, m.group("lead"), quote, value, trailer)
    return found


def edit_grub_default(text: str, present: Sequence[str], absent: Sequence[str] = ()) -> str:
    """``/etc/default/grub`` with the tokens set in GRUB_CMDLINE_LINUX_DEFAULT (every other line kept)."""
    linux = find_grub_assignment(text, "GRUB_CMDLINE_LINUX")
    already = set(linux.tokens) if linux else set()
    wanted = [t for t in present if t not in already]
    assign = find_grub_assignment(text)
    lines = text.splitlines()
    if assign is None:
        new_tokens = edit_tokens([], wanted, absent)
        if not new_tokens:
            return text
        base = text if not text or text.endswith("\n") else text + "\n"
        return base + f'GRUB_CMDLINE_LINUX_DEFAULT="{" ".join(new_tokens)}"\n'
    new_tokens = edit_tokens(assign.tokens, wanted, absent)
    if new_tokens == assign.tokens:
        return text
    lines[assign.line_index] = assign.render(new_tokens)
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")


def render_grub_dropin(tokens: Sequence[str]) -> str:
    """A drop-in for ``/etc/default/grub.d/`` that appends to whatever the main file set."""
    return (
        "# Managed by gpuhost: kernel command line tokens for GPU hosts.\n"
        f'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT {" ".join(tokens)}"\n'
    )
