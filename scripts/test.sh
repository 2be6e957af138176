#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the whole test suite. Needs root: the integration
# tests start real sshd hosts in private namespaces on 127.0.0.0/8.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q "$@"
