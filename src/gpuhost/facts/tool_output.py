"""What a shipped probe prints: one JSON object on its last line (anything before it is its own log)."""

from __future__ import annotations

import json
from typing import Any


def last_json_object(stdout: str) -> dict[str, Any] | None:
    """The JSON object on the last line of ``stdout``; None when there is none (the probe failed)."""
    text = stdout.strip()
    try:
        data = json.loads(text.splitlines()[-1]) if text else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
