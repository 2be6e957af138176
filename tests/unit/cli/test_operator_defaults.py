"""Defaults and comfort: gpuhost.toml and GPUHOST_* variables, help pages, shell completion."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
BOOK = "- name: p\n  hosts: all\n  tasks:\n    - command: {cmd: 'true'}\n"


def gpuhost(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("GPUHOST_")}
    return subprocess.run(
        [sys.executable, "-m", "gpuhost", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**base, "PYTHONPATH": str(REPO / "src"), "XDG_CONFIG_HOME": str(cwd / "xdg"), **(env or {})},
        timeout=60,
    )


def project(tmp_path: Path) -> Path:
    (tmp_path / "inv").mkdir()
    (tmp_path / "inv" / "site.yml").write_text("nodes:\n  pve1: {address: 127.0.8.1}\n  pve2: {address: 127.0.8.2}\n")
    (tmp_path / "other.yml").write_text("nodes:\n  solo: {address: 127.0.8.3}\n")
    (tmp_path / "book.yml").write_text(BOOK)
    (tmp_path / "sub").mkdir()
    return tmp_path


def test_project_file_names_the_inventory_env_overrides_it(tmp_path):
    root = project(tmp_path)
    (root / "gpuhost.toml").write_text('inventory = "inv/site.yml"\nforks = 4\n')
    r = gpuhost("run", "../book.yml", "--list-hosts", cwd=root / "sub")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1:] == ["  pve1", "  pve2"]
    r = gpuhost("run", "book.yml", "--list-hosts", cwd=root, env={"GPUHOST_INVENTORY": str(root / "other.yml")})
    assert r.stdout.splitlines()[1:] == ["  solo"]
    r = gpuhost("run", "book.yml", "--list-hosts", "-i", "other.yml", cwd=root, env={"GPUHOST_INVENTORY": "nope"})
    assert r.stdout.splitlines()[1:] == ["  solo"], "a flag wins over the environment"


def test_user_file_applies_when_the_project_has_none(tmp_path):
    root = project(tmp_path)
    (root / "xdg" / "gpuhost").mkdir(parents=True)
    (root / "xdg" / "gpuhost" / "gpuhost.toml").write_text(f'inventory = "{root / "other.yml"}"\n')
    r = gpuhost("run", "book.yml", "--list-hosts", cwd=root)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1:] == ["  solo"]


def test_bad_config_names_file_line_and_key(tmp_path):
    root = project(tmp_path)
    (root / "gpuhost.toml").write_text('inventory = "inv/site.yml"\nforkz = 4\n')
    r = gpuhost("run", "book.yml", "--list-hosts", cwd=root)
    assert r.returncode == 2
    assert f"{root / 'gpuhost.toml'}:2: field 'forkz': unknown key" in r.stderr
    (root / "gpuhost.toml").write_text('output = "yaml"\n')
    r = gpuhost("run", "book.yml", "--list-hosts", cwd=root)
    assert r.returncode == 2 and "gpuhost.toml:1: field 'output': must be one of text, json, json-events" in r.stderr
    (root / "gpuhost.toml").write_text("forks = [\n")
    r = gpuhost("--help", cwd=root)
    assert r.returncode == 2 and "gpuhost.toml" in r.stderr and "invalid TOML" in r.stderr


def test_help_has_no_bool_noise_and_an_example(tmp_path):
    for cmd in (["run"], ["shell"], ["inventory"], ["provision", "host"], ["provision", "lxc"], ["facts"]):
        r = gpuhost(*cmd, "--help", cwd=tmp_path, env={"COLUMNS": "120"})
        assert r.returncode == 0, r.stderr
        assert "<bool>" not in r.stdout, cmd
        assert not any("\u2500" <= c <= "\u257f" for c in r.stdout), "box drawing in piped help"
        assert "Example: gpuhost " + " ".join(cmd) in r.stdout, cmd


def test_piped_usage_error_is_plain(tmp_path):
    r = gpuhost("run", "x.yml", cwd=tmp_path)
    assert r.returncode == 2 and "Missing option '-i' / '--inventory'" in r.stderr
    assert not any("\u2500" <= c <= "\u257f" for c in r.stderr)


def test_shell_completion_is_on(tmp_path):
    r = gpuhost("--help", cwd=tmp_path)
    assert "--install-completion" in r.stdout and "--show-completion" in r.stdout
    r = gpuhost("--show-completion", "bash", cwd=tmp_path)
    assert r.returncode == 0 and "complete" in r.stdout and "COMPLETE" in r.stdout


FIXTURES = REPO / "tests" / "fixtures"


def test_verify_serve_and_bench_read_the_inventory_from_the_environment_and_the_project_file(tmp_path):
    # the trap: these commands ignored GPUHOST_INVENTORY and gpuhost.toml (a "Missing option '-i'")
    missing = tmp_path / "nowhere.yml"
    for cmd in (["verify", "host"], ["verify", "serve"], ["serve", "status"], ["serve", "logs"]):
        r = gpuhost(*cmd, cwd=tmp_path, env={"GPUHOST_INVENTORY": str(missing)})
        assert r.returncode == 2, (cmd, r.stdout + r.stderr)
        assert "Missing option" not in r.stderr and str(missing) in r.stderr, (cmd, r.stderr)
    (tmp_path / "gpuhost.toml").write_text('inventory = "nowhere.yml"\n')
    r = gpuhost("serve", "stop", "--all", cwd=tmp_path)
    assert r.returncode == 2 and str(missing) in r.stderr, r.stderr
    # an inventory from the environment does not count as an -i given with --parse
    r = gpuhost("bench", "sglang", "--parse", str(FIXTURES / "sglang/bench/v04-deepseek-dp-mla.jsonl"), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_gpuhost_output_json_makes_verify_and_bench_print_their_json(tmp_path):
    env = {"GPUHOST_OUTPUT": "json"}
    bench = FIXTURES / "sglang/bench/v04-deepseek-dp-mla.jsonl"
    r = gpuhost("bench", "sglang", "--parse", str(bench), cwd=tmp_path, env=env)
    assert r.returncode == 0 and json.loads(r.stdout)["schema"] == "gpuhost.bench-sglang/1", r.stdout + r.stderr
    capture = FIXTURES / "p2p/cuda-samples_4x-a100-pcie_nvlink-pairs.txt"
    r = gpuhost("verify", "p2p", "--from-file", str(capture), cwd=tmp_path, env=env)
    assert json.loads(r.stdout)["schema"] == "gpuhost.verify-p2p/2", r.stdout + r.stderr
    r = gpuhost("verify", "p2p", "--from-file", str(capture), cwd=tmp_path)
    assert not r.stdout.startswith("{"), "text stays the default"


def test_inventory_host_shows_the_merged_variables_and_where_each_was_written(tmp_path):
    inv = tmp_path / "site.yml"
    inv.write_text(
        "nodes:\n  pve1:\n    address: 127.0.8.1\n    vars:\n      gpu_path: vm\n  pve2: {address: 127.0.8.2}\n"
        "groups:\n  gpu:\n    nodes: [pve1]\n    vars:\n      uvm_disable_hmm: true\n      gpu_path: lxc\n"
        'vars:\n  gpu_path: none\n  mode: "0644"\n'
    )
    r = gpuhost("inventory", "-i", str(inv), "--host", "pve1", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    # the node's own value wins over its group's and the inventory's, and the string stays a string
    assert data["vars"] == {"gpu_path": "vm", "mode": "0644", "uvm_disable_hmm": True}
    assert data["origins"] == {"gpu_path": f"{inv}:5", "mode": f"{inv}:15", "uvm_disable_hmm": f"{inv}:11"}
    r = gpuhost("inventory", "-i", str(inv), "--host", "pve3", cwd=tmp_path)
    assert r.returncode == 2 and "'pve3' is not a node" in r.stderr


def test_config_shows_each_default_and_where_it_comes_from(tmp_path):
    root = project(tmp_path)
    (root / "gpuhost.toml").write_text('inventory = "inv/site.yml"\nforks = 4\n')
    r = gpuhost("config", "--json", cwd=root / "sub", env={"GPUHOST_OUTPUT": "json-events"})
    assert r.returncode == 0, r.stderr
    rows = {row["key"]: row for row in json.loads(r.stdout)["settings"]}
    assert rows["inventory"]["value"] == str(root / "inv" / "site.yml")
    assert rows["inventory"]["source"] == f"{root / 'gpuhost.toml'}:1"
    assert rows["forks"]["source"] == f"{root / 'gpuhost.toml'}:2"
    assert rows["output"] == {
        "key": "output",
        "env": "GPUHOST_OUTPUT",
        "value": "json-events",
        "source": "environment (GPUHOST_OUTPUT)",
    }
    assert rows["log"]["source"] == "default" and rows["log"]["value"] is None


def test_node_and_group_names_complete_from_the_inventory(tmp_path):
    root = project(tmp_path)
    (root / "inv" / "site.yml").write_text(
        "nodes:\n  pve1: {address: 127.0.8.1}\n  pve2: {address: 127.0.8.2}\n  gpu9: {address: 127.0.8.3}\n"
        "groups:\n  pves: {nodes: [pve1, pve2]}\n"
    )
    env = {"_GPUHOST_COMPLETE": "complete_zsh"}
    for words, want in (
        ("gpuhost facts -i inv/site.yml pve", ["pves", "pve1", "pve2"]),
        ("gpuhost run book.yml -i inv/site.yml --limit pve1,!p", ["pve1,!pves", "pve1,!pve1", "pve1,!pve2"]),
        ("gpuhost shell g", ["gpu9"]),
    ):
        r = subprocess.run(  # as the installed `gpuhost` script runs: its program name is what completion keys on
            [
                sys.executable,
                "-c",
                "import sys; sys.argv[0] = 'gpuhost'; from gpuhost.cli.app import console; console()",
            ],
            capture_output=True,
            text=True,
            cwd=root,
            env={
                **os.environ,
                "PYTHONPATH": str(REPO / "src"),
                **env,
                "_TYPER_COMPLETE_ARGS": words,
                "GPUHOST_INVENTORY": "inv/site.yml",
            },
            timeout=60,
        )
        assert r.returncode == 0, r.stderr
        assert [ln.strip('"').removeprefix("_arguments '*: :((\"") for ln in r.stdout.splitlines()] == [
            *want[:-1],
            want[-1] + "\"))'",
        ], r.stdout
