"""Changing a guest's configuration with PVE's own semantics: digest, per-guest lock, pending values.

* **Digest**: PVE's ``digest`` of a config is the SHA-1 of the file's raw bytes (``parse_pct_config`` and
  ``parse_vm_config``: ``Digest::SHA::sha1_hex($raw)``); ``PUT …/config`` with ``digest=`` fails with
  :data:`MODIFIED` when the file changed since (``PVE::Tools::assert_if_modified``, under the lock).
* **Lock**: PVE's tools take a per-guest ``flock`` around every change (``AbstractConfig::lock_config`` on
  ``config_file_lock``): :func:`lock_path`. A raw edit that only a file write can carry takes the same lock.
* **Pending**: a change PVE cannot apply to a running guest waits in the pending section until its next
  start. What the guest will have then is :func:`effective`; :func:`drift` compares it with what is wanted.
  :func:`apply_params` applies API parameters to a parsed config the way PVE would (for ``--diff``).

Pure functions: nothing here talks to a host.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gpuhost.pve import config as pveconf

#: pve-container ``PVE::LXC::Config::config_file_lock``; qemu-server ``PVE::QemuConfig::config_file_lock``.
_LOCK_PATHS = {"lxc": "/run/lock/lxc/pve-config-{vmid}.lock", "qemu": "/var/lock/qemu-server/lock-{vmid}.conf"}

#: PVE::Tools::assert_if_modified's message (pve-container's API answers it when ``digest`` no longer
#: matches, API2/LXC/Config.pm:176).
MODIFIED = "detected modified configuration - file changed by other user? Try again."
#: ... and qemu-server's own (API2/Qemu.pm:2211-2212 ``update_vm_api``, 6006).
VM_MODIFIED = "checksum mismatch (file change by other user?)"
_MODIFIED_RE = re.compile(r"detected modified configuration|checksum mismatch \(file change by other user\?\)")

#: pve-container's ``$LXC_FASTPLUG_OPTIONS``: applied at once even to a running container.
LXC_FASTPLUG = frozenset(
    {"description", "onboot", "startup", "protection", "hostname", "hookscript", "cores", "tags", "lock"}
)
#: What ``vmconfig_hotplug_pending`` changes in a running container (beyond the fast-plug options).
_LXC_HOTPLUG_SET = re.compile(r"^(cpulimit|cpuunits|memory|swap|net\d+)$")
_LXC_HOTPLUG_NEW = re.compile(r"^(mp\d+|dev\d+)$")  # only when the key is not set yet
_LXC_HOTPLUG_DELETE = re.compile(r"^(unused\d+|swap|cpulimit|cpuunits|net\d+)$")

#: PVE's defaults for container keys gpuhost compares (pve-container's ``$confdesc``): a key that is
#: absent has this value.
LXC_DEFAULTS: Mapping[str, str] = {"onboot": "0", "swap": "512", "memory": "512", "unprivileged": "0"}


def lock_path(kind: pveconf.GuestKind, vmid: int) -> str:
    """The file PVE's tools ``flock`` while they change guest ``vmid``'s config."""
    return _LOCK_PATHS[kind].format(vmid=int(vmid))


def is_modified_error(message: str) -> bool:
    """PVE's answer when the ``digest`` sent no longer matches the config."""
    return bool(_MODIFIED_RE.search(message))


def copy(conf: pveconf.GuestConfig) -> pveconf.GuestConfig:
    """An independent copy (a cached fact must stay what the host has)."""
    return pveconf.parse(conf.text(), conf.kind)


# ---- pending values ---------------------------------------------------------------------------


def pending_value(conf: pveconf.GuestConfig, key: str) -> str | None:
    pending = conf.pending
    if pending is None or key == "delete":
        return None
    return pending.options.get(key)


def effective_value(conf: pveconf.GuestConfig, key: str) -> str | None:
    """What ``key`` will be after the guest's next start: a pending value wins (PVE applies pending
    deletions first, then pending values), a pending deletion removes it."""
    value = pending_value(conf, key)
    if value is not None:
        return value
    if key in conf.pending_deletes():
        return None
    return conf.get(key)


def effective(conf: pveconf.GuestConfig) -> dict[str, str]:
    """Every option as it will be after the guest's next start."""
    keys = set(conf.main.options)
    if conf.pending is not None:
        keys |= {k for k in conf.pending.options if k != "delete"}
    out = {k: effective_value(conf, k) for k in keys}
    return {k: v for k, v in out.items() if v is not None}


@dataclass
class Drift:
    """What a guest's config needs so that ``wanted`` holds after its next start.

    ``set``/``delete``/``revert`` are the API parameters; ``waiting`` names keys whose pending value
    (or pending deletion) is already the wanted one: they apply at the guest's next start."""

    set: dict[str, str] = field(default_factory=dict)
    delete: list[str] = field(default_factory=list)
    revert: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)

    @property
    def changes(self) -> bool:
        return bool(self.set or self.delete or self.revert)

    def params(self) -> tuple[tuple[str, str], ...]:
        """All of it as one call's parameters; only valid when no key is both reverted and deleted
        (see :meth:`calls`)."""
        calls = self.calls()
        if len(calls) > 1:
            raise ValueError(f"{', '.join(self.both())}: revert and delete need two calls")
        return calls[0] if calls else ()

    def both(self) -> list[str]:
        return [k for k in self.delete if k in self.revert]

    def calls(self) -> list[tuple[tuple[str, str], ...]]:
        """The API calls that make the change, in order. PVE refuses ``delete=K`` with ``revert=K`` in
        one call (pve-container API2/LXC/Config.pm:203-208, qemu-server API2/Qemu.pm:2139-2141: 400
        "you can't use '-delete K' and '-revert K' at the same time"), so a key with a pending value
        and a current one is reverted first and deleted in a second call."""
        both = self.both()
        first = list(self.set.items())
        if self.revert:
            first.append(("revert", ",".join(self.revert)))
        rest = [k for k in self.delete if k not in both]
        if rest:
            first.append(("delete", ",".join(rest)))
        out = [tuple(first)] if first else []
        if both:
            out.append((("delete", ",".join(both)),))
        return out


def drift(
    conf: pveconf.GuestConfig,
    wanted: Mapping[str, str | None],
    defaults: Mapping[str, str] | None = None,
) -> Drift:
    """Compare ``wanted`` (``None``: the key must be absent) with the config after its next start.

    A pending deletion or a pending different value of a wanted key is drift (set again: PVE drops the
    pending entries); a pending value equal to the wanted one is waiting, not drift. Removing a key with
    a pending value reverts that value too (PVE's ``delete`` alone leaves it queued)."""
    defaults = defaults or {}
    out = Drift()

    def norm(key: str, value: str | None) -> str | None:
        return defaults.get(key) if value is None else value

    for key, want in wanted.items():
        main = conf.get(key)
        after = effective_value(conf, key)
        if norm(key, after) == norm(key, want):
            if norm(key, main) != norm(key, want):
                out.waiting.append(key)
            continue
        if want is not None:
            out.set[key] = want
            continue
        if pending_value(conf, key) is not None:
            out.revert.append(key)
        if main is not None:
            out.delete.append(key)
    return out


# ---- applying API parameters as PVE would (for the diff) --------------------------------------


def _lxc_applies_now(conf: pveconf.GuestConfig, key: str, deleting: bool) -> bool:
    if key in LXC_FASTPLUG:
        return True
    if deleting:
        return bool(_LXC_HOTPLUG_DELETE.match(key))
    if _LXC_HOTPLUG_SET.match(key):
        return True
    return bool(_LXC_HOTPLUG_NEW.match(key)) and conf.get(key) is None


def _cleanup_pending(conf: pveconf.GuestConfig) -> None:
    """AbstractConfig::cleanup_pending: drop pending values equal to the current ones, and pending
    deletions of keys that are not set."""
    pending = conf.pending
    if pending is None:
        return
    for key, value in list(pending.options.items()):
        if key != "delete" and conf.get(key) == value:
            conf.delete(key, section="pending")
    for key in list(conf.pending_deletes()):
        if conf.get(key) is None:
            conf.remove_pending_delete(key)


def apply_params(
    conf: pveconf.GuestConfig,
    params: Iterable[tuple[str, str]],
    *,
    running: bool,
) -> pveconf.GuestConfig:
    """A copy of ``conf`` after ``PUT …/config`` with ``params`` (``delete``/``revert`` lists included),
    as pve-container's ``update_pct_config`` writes it: every change staged as pending, then applied
    at once where the container is stopped or the key can change live, else left pending."""
    out = copy(conf)
    values: dict[str, str] = {}
    delete: list[str] = []
    revert: list[str] = []
    for key, value in params:
        if key == "delete":
            delete += [k for k in re.split(r"[,;\s]+", value) if k]
        elif key == "revert":
            revert += [k for k in re.split(r"[,;\s]+", value) if k]
        elif key != "digest":
            values[key] = value
    for key in revert:
        out.delete(key, section="pending")
        out.remove_pending_delete(key)
    for key in delete:
        name = key.lstrip("!")
        if out.get(name) is None and pending_value(out, name) is None:
            continue  # PVE: "cannot delete - not set in current configuration!"
        out.add_pending_delete(name, key.startswith("!"))
    for key, value in sorted(values.items()):
        out.set(key, value, section="pending")
        out.remove_pending_delete(key)
    _cleanup_pending(out)

    def applies(key: str, deleting: bool) -> bool:
        if not running:
            return True
        if conf.kind != "lxc":
            return False  # a running VM: the VM role decides what hot-plugs
        return _lxc_applies_now(out, key, deleting)

    for key in sorted(out.pending_deletes()):
        if applies(key, True):
            out.delete(key)
            out.remove_pending_delete(key)
    _cleanup_pending(out)
    pending = out.pending
    for key, value in sorted((pending.options if pending is not None else {}).items()):
        if key != "delete" and applies(key, False):
            out.set(key, value)
            out.delete(key, section="pending")
    return out


# ---- a locked raw edit, and what another writer changed ----------------------------------------

#: Exit status of :data:`LOCKED_EDIT_SCRIPT` when the file no longer has the planned digest.
DIGEST_MISMATCH = 11
#: Exit status when the lock cannot be taken (another tool holds it past the timeout).
LOCK_TIMEOUT = 12

#: ``sh -c`` script: ``LOCK PATH DIGEST WRITE_COMMAND``. Takes PVE's per-guest flock (as
#: ``PVE::Tools::lock_file``: open for append, ``flock`` exclusive, 10 s as ``lock_config``), re-reads the
#: file's SHA-1 under it and runs the write only when it is still the planned one; the lock is held
#: (fd 9) until the write has renamed the new file into place.
LOCKED_EDIT_SCRIPT = r"""
set -u
lock=$1 path=$2 want=$3 write=$4
mkdir -p -- "${lock%/*}" 2>/dev/null
exec 9>>"$lock" || { printf '%s\n' "cannot open $lock" >&2; cat >/dev/null; exit 12; }
flock -w 10 9 || {
  printf '%s\n' "got no lock on $lock within 10 s: another tool is changing this guest" >&2
  cat >/dev/null; exit 12
}
if [ -f "$path" ]; then have=$(sha1sum < "$path") || exit 12; have=${have%% *}; else have=absent; fi
if [ "$have" != "$want" ]; then printf 'digest %s\n' "$have" >&2; cat >/dev/null; exit 11; fi
sh -c "$write"
"""


def config_file(kind: pveconf.GuestKind, vmid: int) -> str:
    return f"/etc/pve/{'lxc' if kind == 'lxc' else 'qemu-server'}/{int(vmid)}.conf"


_CONFIG_PATH_RE = re.compile(r"^/?nodes/[^/]+/(lxc|qemu)/(\d+)/config$")


def config_of_api_path(path: str) -> tuple[pveconf.GuestKind, int] | None:
    """``nodes/pve1/lxc/200/config`` → ``("lxc", 200)``."""
    m = _CONFIG_PATH_RE.match(path)
    if not m:
        return None
    kind: pveconf.GuestKind = "lxc" if m.group(1) == "lxc" else "qemu"
    return kind, int(m.group(2))


def _lines(conf: pveconf.GuestConfig) -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    for section in conf.sections:
        where = section.header or ""
        for key, value in section.options.items():
            out.setdefault((where, key), []).append(value)
        for key, value in section.lxc:
            out.setdefault((where, key), []).append(value)
        if section.description is not None:
            out.setdefault((where, "description"), []).append(section.description.rstrip("\n"))  # one line shown
    return out


def what_changed(before: pveconf.GuestConfig, after: pveconf.GuestConfig) -> list[str]:
    """Each key another writer changed, as ``[section] key: old → new``."""
    old, new = _lines(before), _lines(after)
    out = []
    for where, key in sorted(set(old) | set(new)):
        a, b = old.get((where, key)), new.get((where, key))
        if a == b:
            continue
        prefix = f"{where} " if where else ""
        shown_a = ", ".join(a) if a else "(unset)"
        shown_b = ", ".join(b) if b else "(unset)"
        out.append(f"{prefix}{key}: {shown_a} → {shown_b}")
    return out
