"""A Hugging Face Hub stand-in: ``python3 server.py --bind ADDR --port PORT --repo OWNER/NAME=DIR ...``.

Stdlib only (it runs on a lab node). Every file of DIR is in the repository; ``*.safetensors`` files are LFS
files (their ETag is their sha256, as on the Hub), the others plain git blobs (ETag = git blob sha1). The commit
is a sha1 over the listing, so it changes when a file does. See the package's docstring for the lab controls.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

CONTROL_DIR = os.environ.get("GPUHOST_LAB_HFHUB_CONTROL", "/etc/gpuhost-lab/hfhub")
LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")
CHUNK = 1 << 16


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _git_blob(path: Path) -> str:
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Repo:
    """A directory as a repository at one commit: its files with size, oid and (LFS files) sha256."""

    def __init__(self, repo_id: str, root: Path) -> None:
        self.repo_id, self.root = repo_id, root
        self.files: dict[str, dict[str, object]] = {}
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            rel = path.relative_to(root).as_posix()
            size = path.stat().st_size
            entry: dict[str, object] = {"path": rel, "size": size}
            if rel.endswith(LFS_SUFFIXES):
                sha = _sha256(path)
                # the pointer file git stores for an LFS file, whose blob sha1 is the file's oid
                pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha}\nsize {size}\n".encode()
                entry.update(
                    oid=hashlib.sha1(b"blob %d\0" % len(pointer) + pointer).hexdigest(),
                    lfs={"oid": sha, "size": size, "pointerSize": len(pointer)},
                    etag=sha,
                )
            else:
                entry.update(oid=_git_blob(path), etag=_git_blob(path))
            self.files[rel] = entry
        listing = json.dumps([[e["path"], e["oid"]] for e in self.files.values()]).encode()
        self.sha = hashlib.sha1(b"gpuhost-lab:" + repo_id.encode() + listing).hexdigest()

    def tree(self) -> list[dict[str, object]]:
        out = []
        for e in self.files.values():
            item = {"type": "file", "oid": e["oid"], "size": e["size"], "path": e["path"]}
            if "lfs" in e:
                item["lfs"] = e["lfs"]
            out.append(item)
        return out

    def info(self) -> dict[str, object]:
        siblings = []
        for e in self.files.values():
            s: dict[str, object] = {"rfilename": e["path"], "size": e["size"], "blobId": e["oid"]}
            if "lfs" in e:
                s["lfs"] = {"sha256": e["lfs"]["oid"], "size": e["size"], "pointerSize": e["lfs"]["pointerSize"]}  # type: ignore[index]
            siblings.append(s)
        return {
            "_id": hashlib.sha1(self.repo_id.encode()).hexdigest()[:24],
            "id": self.repo_id,
            "modelId": self.repo_id,
            "sha": self.sha,
            "private": False,
            "gated": "manual" if _token() else False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": ["safetensors", "glm_moe_dsa", "modelopt"],
            "lastModified": "2026-02-11T00:00:00.000Z",
            "createdAt": "2026-02-11T00:00:00.000Z",
            "siblings": siblings,
            "usedStorage": sum(int(e["size"]) for e in self.files.values()),  # type: ignore[call-overload]
        }


def _control(name: str) -> str | None:
    try:
        return Path(CONTROL_DIR, name).read_text().strip() or None
    except OSError:
        return None


def _token() -> str | None:
    return _control("token")


DROPPED: set[str] = set()  # files whose first download was cut off (the ``drop_after`` control)


def _drop_after() -> int | None:
    value = _control("drop_after")
    return int(value) if value and value.isdigit() else None


def _rate() -> float | None:
    value = _control("rate")
    try:
        return float(value) if value else None
    except ValueError:
        return None


REPOS: dict[str, Repo] = {}
LOG: list[Any] = [sys.stderr]  # where requests are logged (``--log FILE`` adds a file)


def log(line: str) -> None:
    for out in LOG:
        print(line, file=out, flush=True)


_API = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)(?:/(?P<kind>revision|tree)/(?P<rev>[^/]+)(?P<sub>/.*)?)?$")
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


class Handler(BaseHTTPRequestHandler):
    server_version = "gpuhost-lab-hfhub/1"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        rng = self.headers.get("Range") if hasattr(self, "headers") and self.headers else None
        log(f"{self.command} {self.path} -> {args[1] if len(args) > 1 else '?'}" + (f" range {rng}" if rng else ""))

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self._handle(body=True)

    def do_HEAD(self) -> None:  # noqa: N802
        self._handle(body=False)

    def _error(self, status: int, code: str, message: str) -> None:
        data = json.dumps({"error": message}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _json(self, value: object, commit: str | None = None) -> None:
        data = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        if commit:
            self.send_header("X-Repo-Commit", commit)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _repo(self, repo_id: str, rev: str) -> Repo | None:
        repo = REPOS.get(repo_id)
        if repo is None:
            self._error(404, "RepoNotFound", f"Repository not found: {repo_id}")
            return None
        want = _token()
        if want and self.headers.get("Authorization") != f"Bearer {want}":
            self._error(401, "GatedRepo", f"Access to model {repo_id} is restricted: you must be authenticated")
            return None
        if unquote(rev) not in ("main", repo.sha):
            self._error(404, "RevisionNotFound", f"Invalid rev id: {unquote(rev)}")
            return None
        return repo

    def _handle(self, *, body: bool) -> None:
        path = urlsplit(self.path).path
        m = _API.match(path)
        if m:
            repo = self._repo(m["repo"], m["rev"] or "main")
            if repo is None:
                return
            if m["kind"] == "tree":
                sub = unquote((m["sub"] or "").lstrip("/"))
                items = [t for t in repo.tree() if not sub or str(t["path"]).startswith(sub + "/")]
                self._json(items)
            else:
                self._json(repo.info())
            return
        m = _RESOLVE.match(path)
        if not m:
            self._error(404, "EntryNotFound", f"no such endpoint: {path}")
            return
        repo = self._repo(m["repo"], m["rev"])
        if repo is None:
            return
        name = unquote(m["file"])
        entry = repo.files.get(name)
        if entry is None:
            self._error(404, "EntryNotFound", f"{name} does not exist on revision {m['rev']}")
            return
        self._send_file(repo, entry, body=body)

    def _send_file(self, repo: Repo, entry: dict[str, object], *, body: bool) -> None:
        size = int(entry["size"])  # type: ignore[call-overload]
        start, end = 0, size - 1
        rng = self.headers.get("Range")
        status = 200
        if rng and size:
            m = _RANGE.match(rng.strip())
            if not m or int(m[1]) >= size:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            start = int(m[1])
            end = min(int(m[2]), size - 1) if m[2] else size - 1
            status = 206
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("X-Repo-Commit", repo.sha)
        self.send_header("ETag", f'"{entry["etag"]}"')
        if "lfs" in entry:
            self.send_header("X-Linked-Etag", f'"{entry["etag"]}"')
            self.send_header("X-Linked-Size", str(size))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(end - start + 1 if size else 0))
        self.end_headers()
        if not body or not size:
            return
        rate = _rate()
        drop = _drop_after()
        cut = None
        if drop is not None and status == 200 and size > drop and str(entry["etag"]) not in DROPPED:
            DROPPED.add(str(entry["etag"]))
            cut = drop  # this file's first full download ends after ``drop`` bytes: the client must resume
        with (repo.root / str(entry["path"])).open("rb") as fh:
            fh.seek(start)
            left = end - start + 1 if cut is None else cut
            while left > 0:
                block = fh.read(min(CHUNK if rate is None else max(1, int(rate / 10)), left))
                if not block:
                    break
                self.wfile.write(block)
                left -= len(block)
                if rate is not None:
                    time.sleep(len(block) / rate)
        if cut is not None:
            self.wfile.flush()
            self.close_connection = True
            log(f"dropped {entry['path']} after {cut} bytes")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--bind", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--repo", action="append", default=[], help="OWNER/NAME=DIRECTORY")
    p.add_argument("--log", help="append the request log to this file too")
    a = p.parse_args(argv)
    if a.log:
        Path(a.log).parent.mkdir(parents=True, exist_ok=True)
        LOG.append(open(a.log, "a"))  # noqa: SIM115 - open while the server runs
    for spec in a.repo:
        repo_id, _, directory = spec.partition("=")
        REPOS[repo_id] = Repo(repo_id, Path(directory))
    ThreadingHTTPServer.daemon_threads = True
    server = ThreadingHTTPServer((a.bind, a.port), Handler)
    log(f"serving {', '.join(REPOS)} on http://{a.bind}:{a.port}")
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
