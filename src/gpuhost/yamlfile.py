"""Read YAML keeping line numbers, so errors can point at the file, line and field.

ruamel's pure-Python parser takes about a millisecond per ten lines (a 16-node inventory: 20 ms, the serving
profiles more), and a run reads the same files again and again. So a file that parsed cleanly is kept, as
parsed, in this user's cache (``yaml/``, named by a hash of its bytes, ruamel's version and :data:`CACHE_SCHEMA`):
the next read of the same bytes loads that copy (under a millisecond) instead, with the same line numbers. A
file that does not parse is never kept, so its error is found and reported as before; the copy is loaded
allowing only ruamel's own data classes, and only from a file this user owns that no one else can write. A file
with a key that names a secret (``password``, ``token``, ``api_key``, not their ``_env``/``_file``/``_id``
references) is never kept: a secret pasted there by mistake is refused, and must not outlive its removal.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.composer import Composer
from ruamel.yaml.constructor import DuplicateKeyError
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import AliasEvent, CollectionStartEvent, ScalarEvent

from gpuhost import usercache
from gpuhost.errors import ConfigError

_PLAIN_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "map", "seq")}


class _Refused(Exception):
    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.message, self.line = message, line


class _StrictComposer(Composer):
    """ruamel's composer, refusing aliases (they can expand without bound) and tags beyond YAML's own
    as it meets them: one pass over the file, with the offending line."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.parser.peek_event()
        line = event.start_mark.line + 1 if event.start_mark else None
        if isinstance(event, AliasEvent):
            raise _Refused("YAML aliases (*name) are not allowed in gpuhost files; write the value out", line)
        tag = getattr(event, "tag", None) if isinstance(event, (ScalarEvent, CollectionStartEvent)) else None
        if tag and str(tag) not in _PLAIN_TAGS:
            raise _Refused(f"unknown YAML tag {str(tag)[:40]}", line)
        return super().compose_node(parent, index)


def load(path: Path, error: type[ConfigError] = ConfigError) -> Any:
    """Parse ``path``; a syntax error, bad bytes, a duplicate key, an alias or an unknown tag names its line.

    Messages never echo a value (a value may be a secret pasted in the wrong place).
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror}", file=str(path)) from None
    kept = _cache_file(raw)
    doc = _load_kept(kept)
    if doc is not None:
        return doc
    doc = _parse(raw, path, error)
    _keep(kept, doc)
    return doc


def _parse(raw: bytes, path: Path, error: type[ConfigError]) -> Any:
    if b"\x00" in raw:
        raise error(
            "contains a NUL byte: not a text file", file=str(path), line=raw[: raw.index(b"\x00")].count(b"\n") + 1
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(
            f"not UTF-8 text (byte 0x{raw[exc.start]:02x})", file=str(path), line=raw[: exc.start].count(b"\n") + 1
        ) from None
    yaml = YAML(typ="rt")
    yaml.Composer = _StrictComposer
    try:
        doc = yaml.load(text)
    except RecursionError:
        raise error(f"nested more than {MAX_DEPTH} levels deep", file=str(path)) from None
    except _Refused as exc:
        raise error(exc.message, file=str(path), line=exc.line) from None
    except DuplicateKeyError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else None
        key = re.search(r'found duplicate key "([^"]{0,60})', str(exc.problem))
        raise error(f"duplicate key '{key.group(1) if key else '?'}'", file=str(path), line=line) from None
    except MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else None
        raise error(f"invalid YAML: {exc.problem}", file=str(path), line=line) from None
    except YAMLError as exc:
        raise error(f"invalid YAML: {type(exc).__name__}", file=str(path)) from None
    _check_depth(doc, path, error)
    return doc


# -- parsed files kept between runs -----------------------------------------------------------
#: change when what a parse accepts or returns changes: every kept parse is then read again
CACHE_SCHEMA = "gpuhost.yamlfile/1"
#: kept parses beyond this many are pruned, oldest first, when a new one is written
CACHE_FILES = 512
#: the classes a kept parse may name: ruamel's containers, scalars and line marks, nothing that runs code
_KEPT_MODULES = frozenset(
    f"ruamel.yaml.{m}"
    for m in ("comments", "error", "tokens", "scalarstring", "scalarint", "scalarfloat", "scalarbool", "timestamp")
)


class _DataOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module not in _KEPT_MODULES:
            raise pickle.UnpicklingError(f"{module}.{name} is not YAML data")
        return super().find_class(module, name)


def _cache_file(raw: bytes) -> Path | None:
    import ruamel.yaml

    try:
        folder = usercache.folder("yaml")
    except RuntimeError:  # no home to find the cache in
        return None
    key = hashlib.sha256(f"{CACHE_SCHEMA}\0{ruamel.yaml.__version__}\0".encode() + raw).hexdigest()
    return folder / f"{key[:40]}.pickle"


def _load_kept(kept: Path | None) -> Any:
    """The parse kept at ``kept``; None when there is none to trust."""
    if kept is None or not usercache.trusted(kept):
        return None
    try:
        doc = _DataOnly(io.BytesIO(kept.read_bytes())).load()
    except Exception:  # a damaged or foreign file: parse again (and replace it)
        return None
    return doc if isinstance(doc, (CommentedMap, CommentedSeq)) else None


#: words of a key (split at ``_`` and ``-``) that name a secret's value: ``password``, ``hf_token``, ``api_key``;
#: a key ending in a reference to one (``_env``, ``_file``, ``_id``) holds no secret
_SECRET_WORDS = frozenset({"password", "passwd", "passphrase", "secret", "token", "apikey"})
_REFERENCE_WORDS = frozenset({"env", "file", "id"})


def _is_secret_key(key: object) -> bool:
    if not isinstance(key, str):
        return False
    words = re.split(r"[_\-]+", key.lower())
    joined = {a + b for a, b in zip(words, words[1:], strict=False)}  # api_key -> apikey
    return bool((set(words) | joined) & _SECRET_WORDS) and words[-1] not in _REFERENCE_WORDS


def _names_a_secret(doc: Any) -> bool:
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if any(_is_secret_key(k) for k in node):
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _keep(kept: Path | None, doc: Any) -> None:
    if kept is None or not isinstance(doc, (CommentedMap, CommentedSeq)) or _names_a_secret(doc):
        return
    try:
        usercache.write(kept, pickle.dumps(doc, protocol=pickle.HIGHEST_PROTOCOL))
        _prune(kept.parent)
    except (OSError, pickle.PicklingError, RecursionError):
        pass  # the cache only saves time


def _prune(folder: Path) -> None:
    entries = [e for e in os.scandir(folder) if e.name.endswith(".pickle")]
    if len(entries) <= CACHE_FILES:
        return
    entries.sort(key=lambda e: e.stat().st_mtime_ns)
    for e in entries[: len(entries) - CACHE_FILES // 2]:
        Path(e.path).unlink(missing_ok=True)


#: deepest nesting of mappings and lists a file may have (an inventory needs about 8)
MAX_DEPTH = 64


def _check_depth(doc: Any, path: Path, error: type[ConfigError]) -> None:
    """Refuse a document nested deeper than :data:`MAX_DEPTH` (walked without recursion), naming its line."""
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, (dict, list)):
            continue
        if depth > MAX_DEPTH:
            lc = getattr(node, "lc", None)
            line = lc.line + 1 if lc is not None and lc.line is not None else None
            raise error(f"nested more than {MAX_DEPTH} levels deep", file=str(path), line=line)
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children)


def plain(value: Any) -> Any:
    """ruamel's commented containers as plain dicts and lists."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def line_of(data: Any, loc: Sequence[str | int]) -> int | None:
    """1-based line of the deepest element of ``loc`` that exists in ``data``."""
    line: int | None = None
    node = data
    for key in loc:
        if isinstance(node, CommentedMap):
            if key not in node:
                # pydantic reports int keys as ints; YAML may hold them as str or int
                alt = str(key) if not isinstance(key, str) else (int(key) if key.isdigit() else None)
                if alt is None or alt not in node:
                    break
                key = alt
            try:
                line = node.lc.key(key)[0] + 1
            except (KeyError, TypeError):
                pass
            node = node[key]
        elif isinstance(node, CommentedSeq) and isinstance(key, int) and 0 <= key < len(node):
            try:
                line = node.lc.item(key)[0] + 1
            except (KeyError, TypeError):
                pass
            node = node[key]
        else:
            break
    if line is None and isinstance(data, (CommentedMap, CommentedSeq)):
        line = data.lc.line + 1
    return line


def raise_validation(
    exc: ValidationError, data: Any, path: Path, error: type[ConfigError], prefix: Sequence[str | int] = ()
) -> None:
    """Turn pydantic's first error into a :class:`ConfigError` naming file, line and field."""
    errors = exc.errors()
    # A misspelt key also makes the real one "missing": report the misspelling.
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = [*prefix, *first["loc"]]
    # drop pydantic's union/function tags such as 'function-after[...]'
    loc = [p for p in loc if not (isinstance(p, str) and ("[" in p and "]" in p))]
    field = ".".join(str(p) for p in loc) or None
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = "unknown field"
    raise error(msg, file=str(path), line=line_of(data, loc), field=field) from None


def parse_scalar(text: str) -> Any:
    """A command-line value read as YAML (``8`` → 8, ``true`` → True, ``[a, b]`` → list)."""
    try:
        return plain(YAML(typ="rt").load(text)) if text.strip() else ""
    except MarkedYAMLError:
        return text
