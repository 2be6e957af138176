"""The lab's own reading and writing of PVE guest config files (/etc/pve/{lxc,qemu-server}/N.conf).

Written from Proxmox VE's code, independently of gpuhost's ``gpuhost.pve.config`` (the lab must not run the
product's code for what it simulates). Sources, at the snapshots the ``fetch`` tool gave:

* proxmox/pve-container 94f5585 ``src/PVE/LXC/Config.pm``: ``parse_pct_config`` (1126-1222) and
  ``write_pct_config`` (1224-1298);
* proxmox/qemu-server e6352be6 ``src/PVE/QemuServer.pm``: ``parse_vm_config`` (1939-2082) and
  ``write_vm_config`` (2084-2195); ``src/PVE/QemuConfig.pm`` ``has_cloudinit`` (609),
  ``src/PVE/QemuServer/Drive.pm`` ``drive_is_cloudinit`` (756-759);
* proxmox/pve-guest-common 4a8f6cb ``src/PVE/AbstractConfig.pm``: ``parse_pending_delete`` (74-91),
  ``print_pending_delete`` (93-103), ``add_to_pending_delete`` (105-117), ``remove_from_pending_delete`` (119-136);
* proxmox/pve-common f665029 ``src/PVE/ParseUtils.pm`` ``encode_text``/``decode_text`` (60-68).

The lab checks no option schema (PVE's ``check_type``): values stay text. Standard library only: it runs
inside the simulated nodes.
"""

from __future__ import annotations

import hashlib
import re
import urllib.parse
from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["qemu", "lxc"]

#: ParseUtils.pm:61-62: "all control and hi-bit characters, ':' and '%'" are escaped; these bytes are not.
_UNESCAPED = frozenset(range(0x20, 0x25)) | frozenset(range(0x26, 0x3A)) | frozenset(range(0x3B, 0x7F))
#: QemuServer/Drive.pm:758 drive_is_cloudinit (the format suffix is any of qemu-server's image formats)
_CLOUDINIT_FILE_RE = re.compile(r"[:/](?:vm-\d+-)?cloudinit(?:\.[a-z0-9]+)?$")
_DRIVE_KEY_RE = re.compile(r"^(?:ide|sata|scsi|virtio)\d+$")


class ParseError(ValueError):
    """What PVE dies with when it parses in strict mode (it only warns otherwise)."""


def encode_text(text: str) -> str:
    """ParseUtils.pm:60-64 ``encode_text``: ``uri_escape(encode("utf8", $text), "^\\x20-\\x24\\x26-\\x39\\x3b-\\x7e")``."""
    return "".join(chr(b) if b in _UNESCAPED else f"%{b:02X}" for b in text.encode("utf-8"))


def decode_text(data: str) -> str:
    """ParseUtils.pm:66-68 ``decode_text``: ``decode("utf8", uri_unescape($data))``."""
    return urllib.parse.unquote_to_bytes(data).decode("utf-8", errors="replace")


def digest_of(raw: str) -> str:
    """Config.pm:1132 / QemuServer.pm:1946: ``digest => Digest::SHA::sha1_hex($raw)``."""
    return hashlib.sha1(raw.encode("utf-8")).hexdigest()


@dataclass
class Section:
    """One hash of PVE's parsed config: the main one, ``pending``, a snapshot or a qemu special section."""

    options: dict[str, str] = field(default_factory=dict)
    description: str | None = None
    #: raw ``lxc.*`` lines in file order (Config.pm:1181 ``push @{ $conf->{lxc} }, [$key, $value]``)
    lxc: list[tuple[str, str]] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not self.options and not self.lxc and self.description is None

    def drop(self, key: str) -> bool:
        """Forget ``key`` (the description is a key of its own); True if it was set."""
        if key != "description":
            return self.options.pop(key, None) is not None
        was_set, self.description = self.description is not None, None
        return was_set


@dataclass
class GuestConfig:
    """A guest config as PVE holds it after parsing; :meth:`text` is what PVE would have on disk."""

    kind: Kind
    main: Section
    pending: Section | None = None
    snapshots: dict[str, Section] = field(default_factory=dict)
    specials: dict[str, Section] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    #: the bytes read, while nothing changed (PVE writes a file only when it changes it)
    raw: str | None = None

    def get(self, key: str, default: str | None = None) -> str | None:
        if key == "description":
            return self.main.description if self.main.description is not None else default
        return self.main.options.get(key, default)

    def text(self) -> str:
        return self.raw if self.raw is not None else render(self)

    @property
    def digest(self) -> str:
        return digest_of(self.text())

    def _section(self, name: str, create: bool) -> Section | None:
        if name == "":
            return self.main
        if name == "pending":
            if self.pending is None and create:
                self.pending = Section()
            return self.pending
        if name not in self.snapshots and create:
            self.snapshots[name] = Section()
        return self.snapshots.get(name)

    def set(self, key: str, value: str, section: str = "") -> None:
        """Set ``key`` in the main section, ``pending`` or a snapshot (``description`` is the description)."""
        if "\n" in value and key != "description":
            # Config.pm:1259-1260 write_pct_config
            raise ValueError(f"detected invalid newline inside property '{key}'")
        target = self._section(section, create=True)
        assert target is not None
        if key == "description":
            target.description = value
        else:
            target.options[key] = value
        self.raw = None

    def delete(self, key: str, section: str = "") -> bool:
        """Remove ``key`` from a section; True if it was set there."""
        target = self._section(section, create=False)
        removed = target is not None and target.drop(key)
        if removed:
            self.raw = None
            self._drop_empty_pending()
        return removed

    def _drop_empty_pending(self) -> None:
        # an empty pending hash writes no section (Config.pm:1288, QemuServer.pm:2178 "if scalar(keys ...)")
        if self.pending is not None and self.pending.is_empty():
            self.pending = None

    # ---- AbstractConfig.pm:74-136, the pending section's ``delete`` list ----

    def pending_deletes(self) -> dict[str, bool]:
        """``parse_pending_delete``: key -> force (``!key``)."""
        data = self.pending.options.get("delete", "") if self.pending is not None else ""
        out: dict[str, bool] = {}
        for entry in re.sub(r"[,;]", " ", data).split():
            out[entry.lstrip("!") if entry.startswith("!") else entry] = entry.startswith("!")
        return out

    def add_pending_delete(self, key: str, force: bool = False) -> None:
        queued = self.pending_deletes()
        queued[key] = force
        self._section("pending", create=True)
        assert self.pending is not None
        self.pending.options["delete"] = _print_pending_delete(queued)
        self.raw = None

    def remove_pending_delete(self, key: str) -> None:
        queued = self.pending_deletes()
        if key not in queued or self.pending is None:
            return
        del queued[key]
        if queued:
            self.pending.options["delete"] = _print_pending_delete(queued)
        else:
            del self.pending.options["delete"]
        self.raw = None
        self._drop_empty_pending()


def _print_pending_delete(queued: dict[str, bool]) -> str:
    """AbstractConfig.pm:93-103: ``join(',', map { $render_key->($_) } sort keys %$delete_hash)``."""
    return ",".join(("!" if queued[k] else "") + k for k in sorted(queued))


def new_config(kind: Kind, options: dict[str, str] | None = None) -> GuestConfig:
    """The config of a guest being created (it has no file yet)."""
    return GuestConfig(kind=kind, main=Section(options=dict(options or {})))


# ---- parsing ----

_LXC_PENDING = re.compile(r"^\[pve:pending\]\s*$", re.IGNORECASE)  # Config.pm:1160
_QEMU_PENDING = re.compile(r"^\[PENDING\]\s*$", re.IGNORECASE)  # QemuServer.pm:1988
_QEMU_SPECIAL = re.compile(r"^\[special:(cloudinit|fleecing)\]\s*$", re.IGNORECASE)  # QemuServer.pm:1995
_SNAPSHOT = re.compile(r"^\[([a-z][a-z0-9_\-]+)\]\s*$", re.IGNORECASE)  # Config.pm:1166, QemuServer.pm:2003
_UNKNOWN = re.compile(r"^\[([^\]]*)\]\s*$")  # QemuServer.pm:2010
_COMMENT = re.compile(r"^#(.*)$")
_LXC_RAW = re.compile(r"^(lxc\.[a-z0-9_\-.]+)(:|\s*=)\s*(.*?)\s*$")  # Config.pm:1179
_DESCRIPTION = re.compile(r"^(description):\s*(.*\S)\s*$")
_SNAPSTATE = re.compile(r"snapstate:\s*(prepare|delete)\s*$")
_ARGS = re.compile(r"^(args):\s*(.*\S)\s*$")  # QemuServer.pm:2031
_DELETE = re.compile(r"^delete:\s*(.*\S)\s*$")
_LXC_KEY = re.compile(r"^([a-z][a-z_]*\d*):\s*(.+?)\s*$")  # Config.pm:1204
_QEMU_KEY = re.compile(r"^([a-z][a-z_\-]*\d*):\s*(.+?)\s*$")  # QemuServer.pm:2042


def parse(raw: str, kind: Kind, strict: bool = False, vmid: int | None = None) -> GuestConfig:
    """``parse_pct_config`` / ``parse_vm_config``: the same sections, the same warnings (``vm N - …``)."""
    conf = GuestConfig(kind=kind, main=Section(), raw=raw)
    prefix = f"vm {vmid} - " if vmid is not None else ""

    def handle_error(message: str) -> None:
        if strict:
            raise ParseError(prefix + message)
        conf.warnings.append(prefix + message)

    current: Section | None = conf.main
    name = ""  # the section's name: "" (main), "pending", a snapshot's, or "special:NAME"
    descr: str | None = None

    def finish_description() -> None:
        # qemu: $descr =~ s/\s+$//, kept even when empty (QemuServer.pm:1970-1976);
        # lxc: "$conf->{description} = $descr if $descr" (Config.pm:1162)
        nonlocal descr
        if current is not None and descr is not None:
            if kind == "qemu":
                current.description = descr.rstrip()
            elif descr and descr != "0":
                current.description = descr
        descr = None

    def start(section: Section | None, section_name: str) -> None:
        nonlocal current, name
        finish_description()
        current, name = section, section_name

    pending_re = _QEMU_PENDING if kind == "qemu" else _LXC_PENDING
    for line in raw.split("\n"):
        if not line.strip():
            continue
        if pending_re.match(line):
            if kind == "qemu" and conf.pending is not None:
                handle_error("duplicate section: pending\n")
            conf.pending = Section()
            start(conf.pending, "pending")
            continue
        m = _QEMU_SPECIAL.match(line) if kind == "qemu" else None
        if m:
            if m.group(1) in conf.specials:
                handle_error(f"duplicate special section: {m.group(1)}\n")
            conf.specials[m.group(1)] = Section()
            start(conf.specials[m.group(1)], "special:" + m.group(1))
            continue
        m = _SNAPSHOT.match(line)
        if m:
            if kind == "qemu" and m.group(1) in conf.snapshots:
                handle_error(f"duplicate snapshot section: {m.group(1)}\n")
            conf.snapshots[m.group(1)] = Section()
            start(conf.snapshots[m.group(1)], m.group(1))
            continue
        m = _UNKNOWN.match(line) if kind == "qemu" else None
        if m:
            start(None, "")
            handle_error(f"skipping unknown section: '{m.group(1)}'\n")
            continue
        if current is None:
            continue  # QemuServer.pm:2018 "next if !defined($section)"
        m = _COMMENT.match(line)
        if m:
            descr = (descr or "") + decode_text(m.group(1)) + "\n"
            continue
        if kind == "lxc":
            m = _LXC_RAW.match(line)
            if m:
                current.lxc.append((m.group(1), m.group(3)))
                continue
        m = _DESCRIPTION.match(line)
        if m:
            descr = (descr or "") + decode_text(m.group(2))
            continue
        m = _SNAPSTATE.search(line)
        if m:
            current.options["snapstate"] = m.group(1)
            continue
        if kind == "qemu":
            m = _ARGS.match(line)
            if m:
                current.options["args"] = m.group(2)
                continue
        m = _DELETE.match(line)
        if m:
            if name == "pending":
                current.options["delete"] = m.group(1)
            else:
                where = "[PENDING]" if kind == "qemu" else "[pve:pending]"
                handle_error(f"property 'delete' is only allowed in {where}\n")
            continue
        m = (_QEMU_KEY if kind == "qemu" else _LXC_KEY).match(line)
        if m:
            key = "ide2" if kind == "qemu" and m.group(1) == "cdrom" else m.group(1)  # QemuServer.pm:2055
            current.options[key] = m.group(2)
            continue
        handle_error(f"unable to parse config: {line}\n")
    finish_description()
    conf.main.options.pop("snapstate", None)  # "delete $res->{snapstate}; # just to be sure"
    conf.raw = raw
    return conf


# ---- writing ----


def render(conf: GuestConfig) -> str:
    """``write_pct_config`` / ``write_vm_config``'s text: main, pending, (qemu) special sections, snapshots."""
    raw = _generate(conf.kind, conf.main, pending=False)
    if conf.pending is not None and not conf.pending.is_empty():
        raw += "\n[PENDING]\n" if conf.kind == "qemu" else "\n[pve:pending]\n"
        raw += _generate(conf.kind, conf.pending, pending=True)
    if conf.kind == "qemu":
        for name in sorted(conf.specials):
            if name == "cloudinit" and not _has_cloudinit(conf.main):  # QemuServer.pm:2183
                continue
            raw += f"\n[special:{name}]\n" + _generate(conf.kind, conf.specials[name], pending=False)
    for name in sorted(conf.snapshots):
        raw += f"\n[{name}]\n" + _generate(conf.kind, conf.snapshots[name], pending=False)
    return raw


def _generate(kind: Kind, section: Section, pending: bool) -> str:
    """The ``$generate_raw_config`` closure of Config.pm:1241-1281 and QemuServer.pm:2153-2174."""
    raw = ""
    descr = section.description
    if descr is not None:
        lines = descr.split("\n")
        while lines and lines[-1] == "":
            lines.pop()  # Perl's split drops trailing empty fields
        if descr and descr != "0":
            raw += "".join("#" + encode_text(line) + "\n" for line in lines)
        elif kind == "qemu" and pending:
            raw += "#\n"
    for key in sorted(section.options):
        raw += f"{key}: {section.options[key]}\n"
    # Config.pm:1263-1276: lxc.environment.runtime lines first, then the other raw lxc.* lines in order
    env = [(k, v) for k, v in section.lxc if k == "lxc.environment.runtime"]
    for key, value in env + [(k, v) for k, v in section.lxc if k != "lxc.environment.runtime"]:
        raw += f"{key}: {value}\n"
    return raw


def _has_cloudinit(section: Section) -> bool:
    """QemuConfig.pm:609 ``has_cloudinit``: a drive whose volume is a cloud-init image."""
    return any(
        _CLOUDINIT_FILE_RE.search(value.split(",")[0].removeprefix("file="))
        for key, value in section.options.items()
        if _DRIVE_KEY_RE.match(key)
    )
