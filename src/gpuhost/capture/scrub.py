"""Keep secrets out of a bundle, and (``--anonymise``) the host's names and addresses.

A line that looks like it carries a secret is replaced whole by :data:`SCRUBBED` (a bundle is shared with others:
a false positive costs a line, a miss costs a credential). PVE writes a guest's description as ``#`` comment
lines with ``%``-escapes (pve-common ``PVE/Tools.pm`` ``encode_text``), so each line is also matched unescaped.
Every secret gpuhost registered (:mod:`gpuhost.redact`) is masked as well.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from urllib.parse import unquote

from gpuhost.redact import redact

SCRUBBED = "# gpuhost-capture: line removed (it looked like a secret)"

#: a key that names a secret, then its value (not a bare number: corosync's ``token: 3000`` is a timeout)
_NAMED = re.compile(
    r"(?i)(?:^|[^\w])(?:api[_-]?key|(?:secret|private|access)[_-]?key|token|secret|password|passwd|passphrase|"
    r"credentials?|authorization|bearer)\s*[:=]\s*(?!\d+\s*$)\S+"
)
_SHAPES = re.compile(
    r"PVEAPIToken=\S+"
    r"|\bhf_[A-Za-z0-9]{20,}"
    r"|\bsk-[A-Za-z0-9_-]{20,}"
    r"|\bgh[pousr]_[A-Za-z0-9]{30,}"
    r"|\bAKIA[0-9A-Z]{16}\b"
    r"|--(?:admin-)?api-key[= ]\S+|--hf-token[= ]\S+"
    r"|\b(?:HF_TOKEN|OPENAI_API_KEY|SGLANG_API_KEY)=\S+"
    r"|!\w[\w.-]*=[0-9a-f]{8}-[0-9a-f]{4}-"  # a PVE API token: user@realm!name=uuid
)
_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----")


def looks_secret(line: str) -> bool:
    for text in {line, unquote(line)}:
        if _NAMED.search(text) or _SHAPES.search(text) or _PEM_BEGIN.search(text):
            return True
    return False


def scrub_secrets(text: str) -> tuple[str, int]:
    """``text`` without its secret-looking lines (and with registered secrets masked); how many lines went."""
    out: list[str] = []
    removed = 0
    in_pem = False
    for line in text.split("\n"):
        if in_pem or looks_secret(line):
            in_pem = (in_pem or bool(_PEM_BEGIN.search(unquote(line)))) and not _PEM_END.search(unquote(line))
            out.append(SCRUBBED)
            removed += 1
            continue
        out.append(line)
    return redact("\n".join(out)), removed


_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)")
_IPV6 = re.compile(r"(?<![\w:.])(?:[0-9A-Fa-f]{1,4}:){1,7}(?::|(?::[0-9A-Fa-f]{1,4}){1,6}|[0-9A-Fa-f]{1,4})(?![\w:])")
_MAC = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{2}:){5}[0-9A-Fa-f]{2}(?![\w:])")


@dataclass
class Anonymiser:
    """The same replacement for the same name or address in every file of one bundle."""

    names: list[str]
    _map: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        order: list[str] = []
        for n in self.names:
            for variant in (n, n.split(".")[0]):
                if variant and len(variant) >= 2 and variant not in order:
                    order.append(variant)
        short: dict[str, str] = {}
        for n in order:
            base = n.split(".")[0]
            short.setdefault(base, f"node{len(short) + 1}")
            self._map[n] = short[base] + (".example.invalid" if "." in n else "")
        self._names = sorted(self._map, key=len, reverse=True)

    def name_for(self, name: str) -> str:
        return self._map.get(name, name)

    def _address(self, kind: str, value: str) -> str:
        key = f"{kind}:{value.lower()}"
        if key not in self._map:
            n = sum(1 for k in self._map if k.startswith(kind + ":")) + 1
            if kind == "v4":
                self._map[key] = f"192.0.2.{n}" if n < 255 else f"198.51.100.{n % 254 + 1}"
            elif kind == "v6":
                self._map[key] = f"2001:db8::{n:x}"
            else:
                self._map[key] = f"02:00:00:00:{n // 256:02x}:{n % 256:02x}"
        return self._map[key]

    def _v4(self, m: re.Match[str]) -> str:
        try:
            ip = ipaddress.IPv4Address(m.group(0))
        except ValueError:
            return m.group(0)  # not an address (an octet over 255)
        if ip.is_loopback or ip.is_unspecified or str(ip).startswith("255."):
            return m.group(0)
        return self._address("v4", str(ip))

    def _v6(self, m: re.Match[str]) -> str:
        text = m.group(0)
        if text.count(":") < 2 or "::" not in text and text.count(":") != 7:
            return text  # a time, a BDF or a ratio, not an address
        try:
            ip = ipaddress.IPv6Address(text)
        except ValueError:
            return text
        if ip.is_loopback or ip.is_unspecified:
            return text
        return self._address("v6", str(ip))

    def apply(self, text: str) -> str:
        text = _MAC.sub(lambda m: self._address("mac", m.group(0)), text)
        text = _IPV4.sub(self._v4, text)
        text = _IPV6.sub(self._v6, text)
        for name in self._names:
            # a node's folder keeps its meaning (/etc/pve/nodes/NAME); /etc/pve itself is not a host name
            text = text.replace(f"/nodes/{name}/", f"/nodes/{self._map[name]}/")
            text = re.sub(rf"(?<![\w./-]){re.escape(name)}(?![\w/-])", self._map[name], text)
        return text
