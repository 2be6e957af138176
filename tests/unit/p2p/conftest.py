from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "p2p"


@pytest.fixture
def fixture_path() -> "type[Path]":
    return FIXTURES  # type: ignore[return-value]


def fixture(name: str) -> Path:
    return FIXTURES / name
