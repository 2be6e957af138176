"""A Hugging Face snapshot on this machine: how complete it is, and its download (shipped to a target).

``status``  (stdlib only, any python3): the repository's listing at the revision (``GET
            /api/models/{repo}/revision/{rev}?blobs=true``: the commit, each file's size, git blob id and LFS
            sha256) compared with the cache's snapshot of that commit: missing files, files of another size or
            hash, and the bytes still to download.
``fetch``   (needs ``huggingface_hub``, run it in the serving venv): files found wrong are removed from the
            cache (``snapshot_download`` trusts a file that is there), the free space is checked against the
            missing bytes, ``snapshot_download`` runs, and every file is verified against the listing (size,
            sha256 of LFS files, git blob sha1 of the others). A connection that drops mid-file is retried by
            ``huggingface_hub`` (resumed with a byte range from the last chunk it wrote). While it downloads, a line
            ``gpuhost-progress done=BYTES total=BYTES t=SECONDS`` comes every ``--progress-every`` seconds (and at
            the start and the end): the bytes of the missing files in the cache's ``blobs/`` so far (whole blobs and
            ``.incomplete`` ones, named by their etag: the sha256 of an LFS file, the git blob id of the others).
            ``huggingface_hub`` writes a file in chunks of ``DOWNLOAD_CHUNK_SIZE`` (10 MiB in 2.4), so the count
            moves by up to that much per file at a time.

Both print one JSON document (``fetch`` after its progress lines). The token is read from ``--token-file`` (mode
0600), never from argv, and is never printed. A verified file is recorded (size, mtime, hash) under ``--record-dir``
so that a later ``status`` does not hash hundreds of gigabytes again; a file whose size or mtime changed is hashed
again.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import stat
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

DEFAULT_ENDPOINT = "https://huggingface.co"
NO_SPACE = 3  # exit status: not enough free space for the missing bytes
BAD = 4  # exit status: a file is still wrong after the download


class Refused(Exception):
    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def read_token(path: str | None) -> str | None:
    if not path:
        return None
    try:
        st = os.stat(path)
    except OSError as exc:
        raise Refused(f"token file {path}: {exc.strerror}") from None
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise Refused(f"token file {path} is readable by others (chmod 600)")
    token = Path(path).read_text().strip()
    return token or None


def listing(endpoint: str, repo: str, revision: str, token: str | None) -> dict[str, Any]:
    url = f"{endpoint.rstrip('/')}/api/models/{repo}/revision/{quote(revision, safe='')}?blobs=true"
    req = urllib.request.Request(url, headers={"User-Agent": "gpuhost-hf-fetch/1"})
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            info = json.load(resp)
    except urllib.error.HTTPError as exc:
        code = exc.headers.get("X-Error-Code") or ""
        hint = {401: " (a gated or private repository: give hf_token_env or hf_token_file)", 403: " (no access)"}
        raise Refused(f"{url}: HTTP {exc.code} {code}{hint.get(exc.code, '')}".replace("  ", " ")) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise Refused(f"{url}: {getattr(exc, 'reason', exc)}") from None
    files = []
    for s in info.get("siblings") or []:
        lfs = s.get("lfs") or {}
        size = s.get("size", lfs.get("size"))
        if size is None:
            raise Refused(f"{url}: the listing gives no size for {s.get('rfilename')}")
        files.append({"path": s["rfilename"], "size": int(size), "sha256": lfs.get("sha256"), "blob": s.get("blobId")})
    if not info.get("sha") or not files:
        raise Refused(f"{url}: no commit or no files in the listing")
    return {"commit": info["sha"], "files": files}


def repo_dir(cache: str, repo: str) -> Path:
    return Path(cache) / ("models--" + repo.replace("/", "--"))


def _hash(path: Path, algo: str, prefix: bytes = b"") -> str:
    h = hashlib.new(algo)
    h.update(prefix)
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _record_path(record_dir: str, repo: str, commit: str) -> Path:
    return Path(record_dir) / f"{repo.replace('/', '--')}@{commit}.json"


def check(cache: str, repo: str, lst: dict[str, Any], record_dir: str, *, write: bool = False) -> dict[str, Any]:
    """Each listed file in the snapshot of the commit: ok, missing, or wrong (size or hash)."""
    snap = repo_dir(cache, repo) / "snapshots" / lst["commit"]
    rec_path = _record_path(record_dir, repo, lst["commit"])
    try:
        record = json.loads(rec_path.read_text())
    except (OSError, ValueError):
        record = {}
    missing, wrong, new_record = [], [], {}
    missing_bytes = 0
    counted: set[str] = set()  # files of one content share one blob: downloaded once

    def add(f: dict[str, Any], n: int) -> int:
        key = f["sha256"] or f["blob"] or f["path"]
        if key in counted:
            return 0
        counted.add(key)
        return n

    for f in lst["files"]:
        path = snap / f["path"]
        try:
            st = path.stat()  # follows the snapshot's link to its blob
        except OSError:
            missing.append(f["path"])
            missing_bytes += add(f, f["size"])
            continue
        if st.st_size != f["size"]:
            wrong.append({"path": f["path"], "why": f"size {st.st_size}, listed {f['size']}"})
            missing_bytes += add(f, f["size"])
            continue
        want = f["sha256"] or f["blob"]
        seen = record.get(f["path"])
        if want and not (seen and seen == [st.st_size, st.st_mtime_ns, want]):
            have = _hash(path, "sha256") if f["sha256"] else _hash(path, "sha1", b"blob %d\0" % st.st_size)
            if have != want:
                wrong.append({"path": f["path"], "why": f"{'sha256' if f['sha256'] else 'git sha1'} {have[:12]}…"})
                missing_bytes += add(f, f["size"])
                continue
        new_record[f["path"]] = [st.st_size, st.st_mtime_ns, want]
    if write and not missing and not wrong:
        rec_path.parent.mkdir(parents=True, exist_ok=True)
        rec_path.write_text(json.dumps(new_record, indent=1, sort_keys=True) + "\n")
    return {
        "commit": lst["commit"],
        "snapshot": str(snap),
        "files": len(lst["files"]),
        "total_bytes": sum(f["size"] for f in lst["files"]),
        "lfs_files": sum(1 for f in lst["files"] if f["sha256"]),
        "missing": missing,
        "wrong": wrong,
        "missing_bytes": missing_bytes,
        "complete": not missing and not wrong,
    }


def free_bytes(path: str) -> int:
    p = Path(path)
    while not p.exists():
        p = p.parent
    st = os.statvfs(p)
    return st.f_bavail * st.f_frsize  # what df --output=avail shows


def set_aside(cache: str, repo: str, lst: dict[str, Any], wrong: list[dict[str, str]]) -> list[str]:
    """Unlink each wrong file from the snapshot and remove its blob, so that ``snapshot_download`` fetches it again
    (it trusts a file that is there). A download cut off half-way is resumed by ``huggingface_hub`` itself, with a
    byte range from where the connection dropped."""
    base = repo_dir(cache, repo)
    done = []
    for w in wrong:
        link = base / "snapshots" / lst["commit"] / w["path"]
        blob = link.resolve()
        if link.is_symlink() or link.exists():
            link.unlink()
        if blob.exists() and blob.parent == base / "blobs":
            blob.unlink()
        done.append(f"{w['path']}: {w['why']}, downloaded again")
    return done


def blob_keys(lst: dict[str, Any], paths: list[str]) -> dict[str, int]:
    """The cache's blob name of each file in ``paths`` and its size (files of one content share one blob)."""
    by_path = {f["path"]: f for f in lst["files"]}
    return {(f["sha256"] or f["blob"] or f["path"]): f["size"] for f in (by_path[p] for p in paths)}


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # renamed or removed since it was listed
        return 0


class OnDisk:
    """Bytes of the missing blobs in the cache now: a complete blob, else the largest of its downloads under way
    (``<etag>.incomplete``, or ``<etag>.<hex>.incomplete`` as huggingface_hub 2.4 names it). A partial file left by
    an earlier process counts only once it grows again (2.x starts a new one rather than resume it)."""

    def __init__(self, cache: str, repo: str, keys: dict[str, int]) -> None:
        self.blobs = repo_dir(cache, repo) / "blobs"
        self.keys = keys
        self.stale = {p: _size(p) for p in self.blobs.glob("*.incomplete")}

    def __call__(self) -> int:
        done = 0
        for key, size in self.keys.items():
            whole = self.blobs / key
            if whole.exists():
                done += min(_size(whole), size)
                continue
            partial = 0
            for path in self.blobs.glob(f"{glob.escape(key)}*.incomplete"):
                n = _size(path)
                if path not in self.stale or n > self.stale[path]:
                    partial = max(partial, n)
            done += min(partial, size)
        return done


class Progress:
    """Prints a ``gpuhost-progress`` line now, every ``every`` seconds while the block runs, and once at its end."""

    def __init__(self, measure: Callable[[], int], total: int, every: float) -> None:
        self.measure, self.total, self.every = measure, total, every
        self.start = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hf-fetch-progress", daemon=True)

    def line(self) -> None:
        done = self.measure()
        print(f"gpuhost-progress done={done} total={self.total} t={time.monotonic() - self.start:.1f}", flush=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.line()

    def __enter__(self) -> Progress:
        self.line()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.line()


def fetch(a: argparse.Namespace, token: str | None) -> dict[str, Any]:
    lst = listing(a.endpoint, a.repo, a.revision, token)
    before = check(a.cache_dir, a.repo, lst, a.record_dir)
    if before["complete"]:
        check(a.cache_dir, a.repo, lst, a.record_dir, write=True)
        return {**before, "downloaded": False, "set_aside": []}
    aside = set_aside(a.cache_dir, a.repo, lst, before["wrong"])
    Path(a.cache_dir).mkdir(parents=True, exist_ok=True)
    free = free_bytes(a.cache_dir)
    if free < before["missing_bytes"]:
        raise Refused(
            f"{a.cache_dir}: {before['missing_bytes']} bytes to download, {free} free; nothing was downloaded",
            NO_SPACE,
        )
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    os.environ.pop("HF_HUB_OFFLINE", None)
    from huggingface_hub import snapshot_download

    keys = blob_keys(lst, before["missing"] + [w["path"] for w in before["wrong"]])
    with Progress(OnDisk(a.cache_dir, a.repo, keys), before["missing_bytes"], a.progress_every):
        path = snapshot_download(
            a.repo, revision=a.revision, cache_dir=a.cache_dir, endpoint=a.endpoint, token=token or False
        )
    after = check(a.cache_dir, a.repo, lst, a.record_dir, write=True)
    if not after["complete"]:
        bad = after["missing"] + [f"{w['path']} ({w['why']})" for w in after["wrong"]]
        raise Refused(f"after the download, still wrong: {', '.join(bad)}", BAD)
    import huggingface_hub

    return {
        **after,
        "downloaded": True,
        "downloaded_bytes": before["missing_bytes"],
        "set_aside": aside,
        "path": path,
        "huggingface_hub": huggingface_hub.__version__,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="hf_fetch", description=__doc__)
    p.add_argument("mode", choices=["status", "fetch"])
    p.add_argument("--repo", required=True)
    p.add_argument("--revision", default="main")
    p.add_argument("--cache-dir", required=True)
    p.add_argument("--endpoint", default=DEFAULT_ENDPOINT)
    p.add_argument("--token-file")
    p.add_argument("--record-dir", required=True)
    p.add_argument("--progress-every", type=float, default=2.0, help="seconds between progress lines (fetch)")
    a = p.parse_args(argv)
    token = None
    try:
        token = read_token(a.token_file)
        if a.mode == "status":
            lst = listing(a.endpoint, a.repo, a.revision, token)
            out = {**check(a.cache_dir, a.repo, lst, a.record_dir), "free_bytes": free_bytes(a.cache_dir)}
        else:
            out = fetch(a, token)
    except Refused as exc:
        print(json.dumps({"error": str(exc), "status": exc.status}))
        return exc.status
    except Exception as exc:  # huggingface_hub's errors: their text, never a traceback with locals
        text = str(exc)
        if token:
            text = text.replace(token, "<secret>")
        print(json.dumps({"error": f"{type(exc).__name__}: {text}"[:2000], "status": 1}))
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
