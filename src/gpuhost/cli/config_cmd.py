"""``gpuhost config``: the defaults in effect (``gpuhost.toml``, ``GPUHOST_*``) and where each comes from."""

from __future__ import annotations

import typer

from gpuhost.cli.root import app


@app.command("config")
def config_command(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (schema gpuhost.config/1)."),
) -> None:
    """Show the defaults in effect: each key of gpuhost.toml, its value, and where it comes from (a config file and
    its line, the environment, or gpuhost's default), then the config files read. A flag given to a command wins.

    Exit 0, 2 bad input (a config file with a bad key: its file, line and key named).

    Example: gpuhost config  |  GPUHOST_FORKS=20 gpuhost config --json
    """
    from gpuhost.cli import config
    from gpuhost.cli.output import console, print_json

    rows = config.in_effect()
    files = [str(p) for p in config.find_files()]
    if config.json_output(as_json):
        print_json({"schema": "gpuhost.config/1", "settings": rows, "files": files})
        return
    for r in rows:
        shown = "-" if r["value"] is None else str(r["value"])
        console.print(f"{r['key']:<10} {shown:<30} {r['source']}", markup=False, soft_wrap=True)
    console.print("config files: " + (", ".join(files) or "none"), markup=False, soft_wrap=True)
