"""Proxmox VE guest configuration files: ``/etc/pve/qemu-server/<vmid>.conf`` and ``/etc/pve/lxc/<ctid>.conf``.

Follows qemu-server's ``parse_vm_config``/``write_vm_config`` and pve-container's
``parse_pct_config``/``write_pct_config``:

* a file is a main section followed by optional sections: ``[PENDING]`` (VMs) or
  ``[pve:pending]`` (containers), ``[special:cloudinit]``/``[special:fleecing]`` (VMs; other
  special sections are skipped as unknown), and one ``[<snapshot>]`` per snapshot;
* ``#`` lines are the section's description (percent-encoded, see :func:`encode_text`);
* ``key: value`` lines are options; containers keep raw ``lxc.*`` lines in file order;
* PVE always writes a section as: description lines, then the options sorted by key, then
  (containers) the raw ``lxc.*`` lines; the pending section first, then special sections and
  snapshots sorted by name, each preceded by an empty line;
* the digest is the SHA1 of the file's raw bytes.

A parsed file that has not been changed renders back to exactly the bytes it was parsed from.
After a change it renders the way PVE would write it. Standard library only: the lab copies this
module into its simulated nodes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

#: The guest kind of :class:`gpuhost.core.guest.Guest`, spelt here again because the lab copies this module into its
#: nodes, standard-library only (tests/unit/pve/test_guest_kind.py keeps the two equal).
GuestKind = Literal["qemu", "lxc"]
SectionKind = Literal["main", "pending", "special", "snapshot"]

_QEMU_PENDING_RE = re.compile(r"^\[PENDING\]\s*$", re.IGNORECASE)
_LXC_PENDING_RE = re.compile(r"^\[pve:pending\]\s*$", re.IGNORECASE)
#: qemu-server knows only these special sections; any other ``[special:NAME]`` is an unknown section.
_SPECIAL_RE = re.compile(r"^\[special:(cloudinit|fleecing)\]\s*$", re.IGNORECASE)
_SNAPSHOT_RE = re.compile(r"^\[([a-z][a-z0-9_\-]+)\]\s*$", re.IGNORECASE)
_UNKNOWN_SECTION_RE = re.compile(r"^\[([^\]]*)\]\s*$")
_QEMU_KEY_RE = re.compile(r"^([a-z][a-z_\-]*\d*):\s*(.+?)\s*$")
_LXC_KEY_RE = re.compile(r"^([a-z][a-z_]*\d*):\s*(.+?)\s*$")
_LXC_RAW_RE = re.compile(r"^(lxc\.[a-z0-9_\-.]+)(:|\s*=)\s*(.*?)\s*$")
_DESCRIPTION_RE = re.compile(r"^(description):\s*(.*\S)\s*$")
_ARGS_RE = re.compile(r"^(args):\s*(.*\S)\s*$")
_DELETE_RE = re.compile(r"^delete:\s*(.*\S)\s*$")
_SNAPSTATE_RE = re.compile(r"snapstate:\s*(prepare|delete)\s*$")

#: Bytes that PVE's ``encode_text`` leaves alone: 0x20-0x24, 0x26-0x39 and 0x3b-0x7e (everything printable but
#: ':' and '%'). '%' is encoded since pve-common 8.2.2 (06f436f, "fix #5486"): decode_text decodes every %XX, so a
#: description holding a link's "%20" must be written "%2520" to read back as it was.
_SAFE_BYTES = frozenset(range(0x20, 0x25)) | frozenset(range(0x26, 0x3A)) | frozenset(range(0x3B, 0x7F))


class ConfigParseError(ValueError):
    """A line PVE itself would refuse in strict mode (it only warns otherwise)."""


def encode_text(text: str) -> str:
    """PVE's encode_text (PVE::Tools, now PVE::ParseUtils): percent-encode control, non-ASCII, ':' and '%' bytes
    of the UTF-8 text."""
    return "".join(chr(b) if b in _SAFE_BYTES else f"%{b:02X}" for b in text.encode("utf-8"))


def decode_text(data: str) -> str:
    """PVE::Tools::decode_text: undo :func:`encode_text` (any ``%XX`` is decoded)."""
    raw = bytearray()
    i = 0
    src = data.encode("utf-8")
    while i < len(src):
        if src[i] == 0x25 and i + 2 < len(src) and _is_hex(src[i + 1 : i + 3]):
            raw.append(int(src[i + 1 : i + 3], 16))
            i += 3
        else:
            raw.append(src[i])
            i += 1
    return raw.decode("utf-8", errors="replace")


def _is_hex(pair: bytes) -> bool:
    return len(pair) == 2 and all(chr(c) in "0123456789abcdefABCDEF" for c in pair)


def digest_of(raw: str | bytes) -> str:
    """The digest PVE reports for a config file: SHA1 of its raw content."""
    data = raw.encode("utf-8") if isinstance(raw, str) else raw
    return hashlib.sha1(data).hexdigest()


@dataclass
class Section:
    """One section of a guest config file."""

    kind: SectionKind
    name: str = ""
    description: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    lxc: list[tuple[str, str]] = field(default_factory=list)

    @property
    def header(self) -> str | None:
        if self.kind == "main":
            return None
        if self.kind == "pending":
            return self.name  # the exact spelling: "[PENDING]" or "[pve:pending]"
        if self.kind == "special":
            return f"[special:{self.name}]"
        return f"[{self.name}]"

    def is_empty(self) -> bool:
        return not self.options and not self.lxc and self.description is None


@dataclass
class GuestConfig:
    """A parsed guest config file; see the module docstring for the rules."""

    kind: GuestKind
    sections: list[Section]
    warnings: list[str] = field(default_factory=list)
    _raw: str | None = None

    # ---- reading -------------------------------------------------------------------------

    @property
    def main(self) -> Section:
        return self.sections[0]

    @property
    def pending(self) -> Section | None:
        """The pending section (the last one, as PVE keeps the last of duplicates)."""
        found = [s for s in self.sections if s.kind == "pending"]
        return found[-1] if found else None

    @property
    def snapshots(self) -> dict[str, Section]:
        return {s.name: s for s in self.sections if s.kind == "snapshot"}

    @property
    def specials(self) -> dict[str, Section]:
        return {s.name: s for s in self.sections if s.kind == "special"}

    @property
    def modified(self) -> bool:
        return self._raw is None

    def get(self, key: str, default: str | None = None) -> str | None:
        """A main-section option (``description`` gives the decoded description)."""
        if key == "description":
            return self.main.description if self.main.description is not None else default
        return self.main.options.get(key, default)

    def lxc_values(self, key: str) -> list[str]:
        """Every value of a raw ``lxc.*`` key in the main section, in file order."""
        return [v for k, v in self.main.lxc if k == key]

    def text(self) -> str:
        """The file content: the original bytes if unchanged, else PVE's rendering."""
        return self._raw if self._raw is not None else self.render()

    @property
    def digest(self) -> str:
        return digest_of(self.text())

    # ---- changing ------------------------------------------------------------------------

    def set(self, key: str, value: str, section: str = "") -> None:
        """Set an option in the main section (``section=""``), the pending section ("pending"),
        or a snapshot (its name). ``description`` sets the description."""
        target = self._section_for_write(section)
        if "\n" in value and key != "description":
            raise ValueError(f"detected invalid newline inside property '{key}'")
        if key == "description":
            target.description = value
        elif key.startswith("lxc."):
            raise ValueError("raw lxc.* keys are set with add_lxc()/remove_lxc()")
        else:
            target.options[key] = value
        self._raw = None

    def delete(self, key: str, section: str = "") -> bool:
        """Remove an option; True if it was there."""
        target = self._section_for_write(section, create=False)
        if target is None:
            return False
        if key == "description":
            had = target.description is not None
            target.description = None
        else:
            had = target.options.pop(key, None) is not None
        if had:
            self._raw = None
            self._drop_empty_pending()
        return had

    def add_lxc(self, key: str, value: str) -> None:
        """Append a raw ``lxc.*`` line to the main section (containers only)."""
        if self.kind != "lxc":
            raise ValueError("raw lxc.* keys exist only in container configs")
        if not _LXC_RAW_RE.match(f"{key}: {value}"):
            raise ValueError(f"not a raw lxc key: {key!r}")
        self.main.lxc.append((key, value))
        self._raw = None

    def replace_lxc(self, key: str, value: str) -> int:
        """Give every raw ``lxc.*`` line with this key the value ``value``, in place; returns how many changed."""
        changed = sum(1 for k, v in self.main.lxc if k == key and v != value)
        if changed:
            self.main.lxc = [(k, value if k == key else v) for k, v in self.main.lxc]
            self._raw = None
        return changed

    def remove_lxc(self, key: str, value: str | None = None) -> int:
        """Remove raw ``lxc.*`` lines with this key (and value, if given); returns how many."""
        before = len(self.main.lxc)
        self.main.lxc = [(k, v) for k, v in self.main.lxc if not (k == key and (value is None or v == value))]
        removed = before - len(self.main.lxc)
        if removed:
            self._raw = None
        return removed

    # ---- the pending section's delete list -----------------------------------------------

    def pending_deletes(self) -> dict[str, bool]:
        """Keys queued for deletion in the pending section, mapped to their force flag (``!key``)."""
        pending = self.pending
        if pending is None or "delete" not in pending.options:
            return {}
        out: dict[str, bool] = {}
        for item in re.split(r"[,;\s]+", pending.options["delete"]):
            if item:
                out[item.lstrip("!")] = item.startswith("!")
        return out

    def add_pending_delete(self, key: str, force: bool = False) -> None:
        queued = self.pending_deletes()
        queued[key] = force
        self._write_pending_deletes(queued)

    def remove_pending_delete(self, key: str) -> None:
        queued = self.pending_deletes()
        if key in queued:
            del queued[key]
            self._write_pending_deletes(queued)

    def _write_pending_deletes(self, queued: dict[str, bool]) -> None:
        pending = self._section_for_write("pending")
        if queued:
            pending.options["delete"] = ",".join(("!" if f else "") + k for k, f in queued.items())
        else:
            pending.options.pop("delete", None)
        self._raw = None
        self._drop_empty_pending()

    def _section_for_write(self, section: str, create: bool = True) -> Section:
        if section == "":
            return self.main
        if section == "pending":
            existing = self.pending
            if existing is not None:
                return existing
            if not create:
                return None  # type: ignore[return-value]
            header = "[PENDING]" if self.kind == "qemu" else "[pve:pending]"
            new = Section("pending", header)
            self.sections.insert(1, new)
            return new
        snap = self.snapshots.get(section)
        if snap is None:
            if not create:
                return None  # type: ignore[return-value]
            snap = Section("snapshot", section)
            self.sections.append(snap)
        return snap

    def _drop_empty_pending(self) -> None:
        self.sections = [s for s in self.sections if not (s.kind == "pending" and s.is_empty())]

    # ---- writing -------------------------------------------------------------------------

    def render(self) -> str:
        """The file as PVE's writer produces it."""
        out = self._render_section(self.main, is_pending=False)
        pending = self.pending
        if pending is not None and (pending.options or pending.lxc or pending.description is not None):
            out += "\n" + ("[PENDING]" if self.kind == "qemu" else "[pve:pending]") + "\n"
            out += self._render_section(pending, is_pending=True)
        if self.kind == "qemu":
            for name, special in sorted(self.specials.items()):
                out += f"\n[special:{name}]\n" + self._render_section(special, is_pending=False)
        for name, snap in sorted(self.snapshots.items()):
            out += f"\n[{name}]\n" + self._render_section(snap, is_pending=False)
        return out

    def _render_section(self, section: Section, is_pending: bool) -> str:
        out = ""
        descr = section.description
        if descr is not None:
            lines = descr.split("\n")
            while lines and lines[-1] == "":
                lines.pop()  # Perl's split drops trailing empty fields
            if lines:
                out += "".join(f"#{encode_text(line)}\n" for line in lines)
            elif is_pending and self.kind == "qemu":
                out += "#\n"
        for key in sorted(section.options):
            out += f"{key}: {section.options[key]}\n"
        for key, value in section.lxc:
            out += f"{key}: {value}\n"
        return out


def parse(raw: str, kind: GuestKind, strict: bool = False) -> GuestConfig:
    """Parse a guest config file. Lines PVE would warn about are kept in ``warnings``
    (or raise :class:`ConfigParseError` when ``strict``)."""
    parser = _Parser(kind, strict)
    for line in raw.split("\n"):
        parser.feed(line)
    return GuestConfig(kind=kind, sections=parser.finish(), warnings=parser.warnings, _raw=raw)


def parse_file(path: str, strict: bool = False) -> GuestConfig:
    """Parse ``/etc/pve/{qemu-server,lxc}/<id>.conf``; the kind comes from the directory."""
    kind: GuestKind = "lxc" if "/lxc/" in path.replace("\\", "/") else "qemu"
    with open(path, encoding="utf-8") as fh:
        return parse(fh.read(), kind, strict)


def new_config(kind: GuestKind, options: dict[str, str] | None = None) -> GuestConfig:
    """An empty config (to create a guest)."""
    main = Section("main", options=dict(options or {}))
    return GuestConfig(kind=kind, sections=[main])


class _Parser:
    def __init__(self, kind: GuestKind, strict: bool) -> None:
        self.kind = kind
        self.strict = strict
        self.sections: list[Section] = [Section("main")]
        self.current: Section | None = self.sections[0]
        self.descr: list[str] | None = None
        self.warnings: list[str] = []

    def warn(self, msg: str) -> None:
        if self.strict:
            raise ConfigParseError(msg)
        self.warnings.append(msg)

    def start(self, section: Section | None) -> None:
        self.flush_description()
        self.current = section
        if section is not None:
            self.sections.append(section)

    def flush_description(self) -> None:
        if self.current is not None and self.descr is not None:
            text = "".join(self.descr)
            if self.kind == "qemu":
                self.current.description = text.rstrip()
            elif text:
                self.current.description = text
        self.descr = None

    def feed(self, line: str) -> None:
        if not line.strip():
            return
        header = self.section_header(line)
        if header is not False:
            self.start(header)  # type: ignore[arg-type]
            return
        if self.current is None:
            return  # inside an unknown section: PVE skips it
        if line.startswith("#"):
            self.descr = (self.descr or []) + [decode_text(line[1:]) + "\n"]
            return
        self.option(line)

    def section_header(self, line: str) -> Section | None | bool:
        pending_re = _QEMU_PENDING_RE if self.kind == "qemu" else _LXC_PENDING_RE
        if pending_re.match(line):
            return Section("pending", line.strip())
        if self.kind == "qemu":
            m = _SPECIAL_RE.match(line)
            if m:
                return Section("special", m.group(1))
        m = _SNAPSHOT_RE.match(line)
        if m:
            return Section("snapshot", m.group(1))
        m = _UNKNOWN_SECTION_RE.match(line)
        if m:
            self.warn(f"skipping unknown section: '{m.group(1)}'")
            return None
        return False

    def option(self, line: str) -> None:
        section = self.current
        assert section is not None
        if self.kind == "lxc":
            m = _LXC_RAW_RE.match(line)
            if m:
                section.lxc.append((m.group(1), m.group(3)))
                return
        m = _DESCRIPTION_RE.match(line)
        if m:
            self.descr = (self.descr or []) + [decode_text(m.group(2))]
            return
        m = _SNAPSTATE_RE.search(line)
        if m:
            # PVE keeps a snapshot's (or the pending section's) snapstate and drops the main section's
            if section.kind != "main":
                section.options["snapstate"] = m.group(1)
            return
        m = _DELETE_RE.match(line)
        if m:
            if section.kind == "pending":
                section.options["delete"] = m.group(1)
            else:
                self.warn("property 'delete' is only allowed in the pending section")
            return
        if self.kind == "qemu":
            m = _ARGS_RE.match(line) or _QEMU_KEY_RE.match(line)
        else:
            m = _LXC_KEY_RE.match(line)
        if m:
            section.options[m.group(1)] = m.group(2)
            return
        self.warn(f"unable to parse config: {line}")

    def finish(self) -> list[Section]:
        self.flush_description()
        return self.sections


def iter_property_string(value: str) -> Iterator[tuple[str | None, str]]:
    """Split a PVE property string ``a=1,b=2,default`` into (key, value); a bare item has key None."""
    for item in value.split(","):
        if not item:
            continue
        if "=" in item:
            k, v = item.split("=", 1)
            yield k, v
        else:
            yield None, item


def parse_property_string(value: str, default_key: str | None = None) -> dict[str, str]:
    """``0000:01:00.0,pcie=1`` with ``default_key="host"`` -> ``{"host": "0000:01:00.0", "pcie": "1"}``."""
    out: dict[str, str] = {}
    for k, v in iter_property_string(value):
        if k is None:
            if default_key is None or default_key in out:
                raise ValueError(f"value without key in property string: {v!r}")
            out[default_key] = v
        else:
            out[k] = v
    return out
