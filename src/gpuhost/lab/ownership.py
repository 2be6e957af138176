"""What a lab owns in its state directory, so that ``lab down`` removes that and nothing else.

``lab up`` claims a state directory that does not exist (it creates it, 0700) or that exists,
is empty, belongs to root and is writable by nobody else (its mode is left alone). It writes a
marker, ``.gpuhost-lab``: a random lab id, whether it created the directory, and the top-level
entries it made. ``lab down`` refuses a directory without a valid marker (a ``lab.json`` alone
proves nothing), removes only the listed entries, and removes the directory itself only if it
created it and nothing else is left in it.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import uuid
from dataclasses import dataclass, field

from gpuhost.errors import LabError, UsageError
from gpuhost.lab.layout import LabLayout

MARKER_SCHEMA = "gpuhost.lab-marker/1"


@dataclass
class Ownership:
    lab_id: str
    created_dir: bool
    entries: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return (
            json.dumps(
                {
                    "schema": MARKER_SCHEMA,
                    "lab_id": self.lab_id,
                    "created_dir": self.created_dir,
                    "entries": sorted(set(self.entries)),
                },
                indent=1,
            )
            + "\n"
        )


def read_marker(layout: LabLayout) -> Ownership | None:
    """The marker, or None when there is none or it is not one of ours."""
    path = layout.marker_file
    if path.is_symlink() or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("schema") != MARKER_SCHEMA or not isinstance(data.get("lab_id"), str):
        return None
    entries = [e for e in data.get("entries", []) if isinstance(e, str) and _plain_name(e)]
    return Ownership(data["lab_id"], bool(data.get("created_dir")), entries)


def claim(layout: LabLayout) -> Ownership:
    """Take an absent or empty, safe directory for a new lab and mark it (never chmods a directory
    it did not create)."""
    root = layout.root
    created = False
    if root.is_symlink():
        raise UsageError(f"state directory {root} is a symbolic link; give the real path")
    if not root.exists():
        root.parent.mkdir(parents=True, exist_ok=True)
        try:
            root.mkdir(mode=0o700)
            created = True
        except FileExistsError:
            pass
    if not root.is_dir():
        raise UsageError(f"state directory {root} is not a directory")
    if not created:
        if any(root.iterdir()):
            raise UsageError(f"state directory {root} is not empty and holds no lab")
        st = root.stat()
        if st.st_uid != os.geteuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise UsageError(
                f"state directory {root} must belong to root and be writable by root only "
                f"(it is mode {stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid}); gpuhost does "
                "not change the mode of a directory it did not create: use a new path"
            )
    else:
        os.chmod(root, 0o700)  # ours: make sure of it whatever the umask
    owner = Ownership(uuid.uuid4().hex, created)
    record(layout, owner)
    return owner


def record(layout: LabLayout, owner: Ownership, extra: list[str] | None = None) -> None:
    """Note every entry now in the directory (all made by this lab: it was empty when claimed)."""
    names = [p.name for p in layout.root.iterdir() if p.name != layout.marker_file.name]
    owner.entries = sorted(set(owner.entries) | set(names) | set(extra or []))
    tmp = layout.marker_file.with_name(layout.marker_file.name + ".tmp")
    tmp.write_text(owner.to_json())
    os.replace(tmp, layout.marker_file)


def require_owned(layout: LabLayout) -> Ownership:
    owner = read_marker(layout)
    if owner is None:
        raise LabError(
            f"{layout.root} holds {layout.spec_file.name} but no gpuhost lab marker "
            f"({layout.marker_file.name}): it was not made by 'gpuhost lab up'; nothing was removed"
        )
    return owner


def remove_owned(layout: LabLayout, owner: Ownership) -> None:
    """Remove the lab's entries, then the marker, then the directory if the lab made it and it is empty."""
    for name in owner.entries:
        path = layout.root / name
        if path.is_symlink() or path.is_file() or path.is_socket():
            path.unlink(missing_ok=True)
        elif path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
    layout.marker_file.unlink(missing_ok=True)
    if owner.created_dir:
        try:
            layout.root.rmdir()
        except OSError:
            pass  # someone else put something there: leave it


def _plain_name(name: str) -> bool:
    return name not in ("", ".", "..") and "/" not in name and "\0" not in name
