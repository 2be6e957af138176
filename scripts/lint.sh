#!/usr/bin/env bash
# Static checks: ruff (lint and format) over the tree, mypy (strict on the core, operations, facts,
# checks and connections; see pyproject.toml). Needs the virtualenv from scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
