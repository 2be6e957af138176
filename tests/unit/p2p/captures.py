from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "p2p"


def fixture(name: str) -> Path:
    """A captured output under tests/fixtures/p2p (see SOURCE.md there)."""
    return FIXTURES / name
