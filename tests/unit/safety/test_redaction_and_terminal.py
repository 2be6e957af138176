"""Secrets never leave gpuhost, and text from outside never reaches the terminal raw (issue 31, items 3-4).

Planted: an API key gpuhost never read, in a launch command (``--api-key KEY``) and in SGLang's ``server_args``
line (a dataclass repr before 0.5.12, a dict's after, as ``sglang/srt/server_args.py`` prints it and the lab's
stand-in copies), and a terminal title sequence ``ESC ]0;…BEL``.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from gpuhost.cli.app import _register, app
from gpuhost.cli.doctor import MAX_LINE_BYTES, read_log
from gpuhost.redact import MASK, for_terminal, printable, redact
from tests.support.local import local_inventory

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "sglang" / "logs"
KEY = "sk-planted-9f1c2e7a5b"
TITLE = "\x1b]0;owned terminal\x07"
_register()
runner = CliRunner()


@pytest.mark.parametrize(
    "line",
    [
        f"exec /opt/gpuhost/venvs/p/bin/sglang serve --model-path /srv/m --api-key {KEY} --port 30000",
        f"python -m sglang.launch_server --api-key={KEY}",
        f"[2026-02-26 15:56:59] server_args=ServerArgs(model_path='zai-org/GLM-5-FP8', api_key='{KEY}', port=30000)",
        f"[2026-02-26 15:56:59] server_args={{'model_path': 'zai-org/GLM-5-FP8', 'api_key': '{KEY}', 'port': 30000}}",
        f"SGLANG_API_KEY={KEY}",
        f'curl -H "Authorization: Bearer {KEY}" http://127.0.0.1:30000/v1/models',
    ],
    ids=["flag", "flag-equals", "server-args-repr", "server-args-dict", "env-line", "bearer"],
)
def test_a_key_shown_as_a_key_is_masked_though_gpuhost_never_read_it(line: str) -> None:
    out = redact(line)
    assert KEY not in out and MASK in out


def test_a_key_found_once_is_masked_everywhere_after() -> None:
    other = "sk-other-planted-77aa"
    redact(f"--api-key {other}")
    assert redact(f"the client sent {other}") == f"the client sent {MASK}"


def test_references_and_empty_keys_are_left_alone() -> None:
    text = 'exec sglang serve --api-key "$SGLANG_API_KEY" ; server_args=ServerArgs(api_key=None, admin_api_key=None)'
    assert redact(text) == text


def test_control_characters_are_escaped_newline_and_tab_kept() -> None:
    assert printable(f"a{TITLE}b\tc\r\nd\x9b2J") == "a\\x1b]0;owned terminal\\x07b\tc\nd\\x9b2J"
    assert for_terminal(f"{TITLE} --api-key {KEY}") == f"\\x1b]0;owned terminal\\x07 --api-key {MASK}"


def _planted_log(tmp_path: Path) -> Path:
    lines = (LOGS / "sglang-19408-glm-moe-dsa-keyerror.log").read_text().splitlines(keepends=True)
    lines[6] = lines[6].rstrip("\n") + f" while running: sglang serve --api-key {KEY} {TITLE}\n"
    log = tmp_path / "planted.log"
    log.write_text("".join(lines))
    return log


def test_doctor_text_masks_the_key_and_escapes_the_title(tmp_path: Path) -> None:
    r = runner.invoke(app, ["doctor", "sglang-log", str(_planted_log(tmp_path))])
    assert r.exit_code == 1, r.output
    assert "FAIL sglang.log.transformers-model-type" in r.output
    assert KEY not in r.output and "\x1b" not in r.output and "\x07" not in r.output
    assert "--api-key ********" in r.output and "\\x1b]0;owned terminal\\x07" in r.output


def test_doctor_json_masks_the_key(tmp_path: Path) -> None:
    r = runner.invoke(app, ["doctor", "sglang-log", "--json", str(_planted_log(tmp_path))])
    assert r.exit_code == 1
    assert KEY not in r.output
    data = json.loads(r.output)
    texts = [line["text"] for f in data["findings"] for line in f["lines"]]
    assert any("--api-key ********" in t and "\\x1b]0;" in t for t in texts), texts


def test_doctor_cuts_an_enormous_line_and_still_finds_the_signature() -> None:
    log = (LOGS / "sglang-19408-glm-moe-dsa-keyerror.log").read_bytes()
    huge = b"[2026-02-26 15:56:58] INFO: " + b"x" * (8 * MAX_LINE_BYTES) + b"\n"
    text = read_log(io.BytesIO(huge + log))
    first = text.splitlines()[0]
    assert len(first) < MAX_LINE_BYTES + 20 and first.endswith("[cut]")
    assert "KeyError: 'glm_moe_dsa'" in text


def test_serve_logs_masks_the_server_args_key_and_escapes_the_title(monkeypatch: pytest.MonkeyPatch) -> None:
    import gpuhost.cli.serve as serve_cli
    import gpuhost.serve.service as serve_runner

    journal = [
        "Dec 01 10:00:00 llm gpuhost-sglang[812]: gpuhost-sglang: start 1a2b profile=p argv-sha256=00",
        f"Dec 01 10:00:05 llm gpuhost-sglang[812]: [2026-12-01 10:00:05] server_args=ServerArgs(model_path='/srv/m', "
        f"api_key='{KEY}', port=30000)",
        f"Dec 01 10:00:06 llm gpuhost-sglang[812]: {TITLE}",
    ]
    target = SimpleNamespace(subject="pve1/CT 200")
    monkeypatch.setattr(serve_cli, "_one", lambda inventory, limit, ctid: (None, [target]))
    monkeypatch.setattr(serve_runner, "logs", lambda inv, t, whole, lines, connect: journal)
    r = runner.invoke(app, ["serve", "logs", "-i", "inventory.yml"])
    assert r.exit_code == 0, r.output
    assert KEY not in r.output and "api_key='********'" in r.output
    assert "\x1b" not in r.output and "\\x1b]0;owned terminal\\x07" in r.output


def test_shell_output_is_escaped(tmp_path: Path) -> None:
    inv = local_inventory(tmp_path, ["h1"])
    r = runner.invoke(app, ["shell", "h1", "-i", str(inv), "--", r"printf 'a\033]0;owned\007b\n'"])
    assert r.exit_code == 0, r.output
    assert "\x1b" not in r.output and "a\\x1b]0;owned\\x07b" in r.output


def test_a_json_escaped_key_reference_stays_valid_json() -> None:
    """A report's JSON text holds the launch command with its quotes escaped: ``--api-key \\"$SGLANG_API_KEY\\"``
    was masked as a key of one backslash, and ``launch sglang --json`` printed JSON that does not parse (found by
    tests/faults/test_kill_push_and_venv.py). A key in escaped quotes is still masked."""
    import json

    ref = json.dumps({"diff": '+exec sglang serve --api-key "$SGLANG_API_KEY" --port 30000\n'})
    assert redact(ref) == ref
    real = json.dumps({"diff": f'--api-key "{KEY}" SGLANG_API_KEY="{KEY}"'})
    masked = redact(real)
    assert json.loads(masked) == {"diff": '--api-key "********" SGLANG_API_KEY="********"'}
