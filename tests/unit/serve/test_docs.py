from pathlib import Path

from gpuhost.checks import registered
from gpuhost.serve import validate  # noqa: F401  (registers the rules)
from gpuhost.serve.logscan import SIGNATURES  # noqa: F401

DOC = Path(__file__).resolve().parents[3] / "docs" / "serve.md"


def test_every_serve_check_and_signature_is_documented():
    text = DOC.read_text()
    names = [n for n in registered() if n.startswith(("serve.", "sglang.log."))]
    assert len(names) >= 30
    for name in names:
        assert f"`{name}`" in text, name
