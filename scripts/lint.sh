#!/usr/bin/env bash
# Static checks: ruff (lint and format) over the tree, mypy (strict on the core, operations, facts,
# checks and connections; see pyproject.toml), and the runbook site built strictly (a broken link,
# a missing page or a failing reference generator fails; about 1.5 s). Needs the virtualenv from scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --site-dir "${GPUHOST_SITE_DIR:-site}"
