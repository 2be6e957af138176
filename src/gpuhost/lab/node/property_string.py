"""PVE property strings (``0000:01:00.0,pcie=1``), read as pve-common does: the lab's own reading, so a
product bug in the same job cannot pass because the lab shares it.

proxmox/pve-common src/PVE/JSONSchema.pm:1096-1135 ``parse_property_string``: split on ``,``, skip blank
parts; ``k=v`` (``^([^=]+)=(.+)$``) sets a key, a duplicate dies; a part without ``=`` is the format's
default key, once; anything else dies. (Key validation against the format is the caller's.)
"""

from __future__ import annotations

import re


class PropertyStringError(ValueError):
    pass


def parse(data: str, default_key: str | None = None) -> dict[str, str]:
    out: dict[str, str] = {}
    default_seen = False
    for part in data.split(","):
        if not part.strip():
            continue
        m = re.fullmatch(r"([^=]+)=(.+)", part, re.DOTALL)
        if m:
            key, value = m.group(1), m.group(2)
            if key in out:
                raise PropertyStringError(f"duplicate key in comma-separated list property: {key}")
            out[key] = value
        elif "=" not in part:
            if default_key is None:
                raise PropertyStringError("value without key, but schema does not define a default key")
            if default_seen or default_key in out:
                raise PropertyStringError(f"duplicate key in comma-separated list property: {default_key}")
            out[default_key] = part
            default_seen = True
        else:  # "k=" with an empty value: the pattern needs one character after '='
            raise PropertyStringError(f"invalid key in comma-separated list property: {part}")
    return out
