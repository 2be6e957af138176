"""Where a launched SGLang server lives on its target, and how its start is told apart from earlier ones.

The layout is the same on an LXC container, a VM guest or a bare host: only how gpuhost reaches it differs.
Each start gets a fresh token: gpuhost writes it to :data:`MARKER_FILE`, the launch script prints
``gpuhost-sglang: start TOKEN ...`` as its first line, and readiness reads only the journal after that line, so a
"ready" or "crash" line of an earlier start never counts.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

UNIT = "gpuhost-sglang.service"
ENV_FILE = "/etc/gpuhost/sglang.env"
LAUNCH_SCRIPT = "/opt/gpuhost/sglang/launch.sh"
STATE_DIR = "/var/lib/gpuhost/sglang"
MARKER_FILE = f"{STATE_DIR}/start-marker"
STATE_FILE = f"{STATE_DIR}/launched.json"
#: the start of the server the full proof (smoke, canary, logprobs) last passed on, and its configuration: a
#: converged re-run of the launch proves that start again cheaply (/health, /server_info)
PROVED_FILE = f"{STATE_DIR}/proved.json"
UNIT_FILE = f"/etc/systemd/system/{UNIT}"
#: the Hugging Face cache a repo id is downloaded to (HF_HUB_CACHE of the service); sglang_hf_cache overrides it
HF_CACHE = "/root/.cache/huggingface/hub"
#: the Hugging Face token, when the inventory gives one (mode 0600); the download reads it, the server never does
HF_TOKEN_FILE = "/etc/gpuhost/hf-token"
#: files of a snapshot verified by gpuhost (size, mtime, hash), so a later run does not hash them again
MODEL_RECORD_DIR = f"{STATE_DIR}/models"
MARKER_PREFIX = "gpuhost-sglang: start "
_TOKEN = re.compile(r"^[0-9a-f]{16,64}$")


def venv_dir(profile: str) -> str:
    return f"/opt/gpuhost/sglang/{profile}/venv"


def install_script(profile: str) -> str:
    return f"/opt/gpuhost/sglang/{profile}/install.sh"


def hf_snapshot_dir(cache: str, repo: str, commit: str) -> str:
    return f"{cache}/models--{repo.replace('/', '--')}/snapshots/{commit}"


def config_sha256(texts: Iterable[str]) -> str:
    """One hash over what a start is made of (unit, env file, launch script): a change means a restart."""
    h = hashlib.sha256()
    for t in texts:
        h.update(hashlib.sha256(t.encode()).digest())
    return h.hexdigest()


def valid_token(token: str) -> bool:
    return bool(_TOKEN.match(token))


def lines_of_start(journal: str, token: str) -> list[str] | None:
    """The journal lines after this start's marker (its first occurrence: a restart by systemd prints it again and
    the earlier crash must still count); ``None`` when the marker is not in the journal yet."""
    if not valid_token(token):
        return None
    lines = journal.splitlines()
    want = MARKER_PREFIX + token
    for i, line in enumerate(lines):
        if want in line and line.split(want, 1)[1][:1] in ("", " "):
            return lines[i + 1 :]
    return None


def probe_url(host: str, port: int) -> str:
    """The URL the probe on the target uses: a wildcard listen address is reached on loopback."""
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"
