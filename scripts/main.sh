#!/usr/bin/env bash
# The main job on the built-in default: start a lab of simulated Proxmox VE nodes on
# loopback (127.0.100.0/24) and provision it with gpuhost. Needs root on Debian 12.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
state=/run/gpuhost-lab
if ! .venv/bin/gpuhost lab status --state-dir "$state" >/dev/null 2>&1; then
  .venv/bin/gpuhost lab up --nodes 1 --boot grub --cpu intel --state-dir "$state"
fi
.venv/bin/gpuhost run playbooks/example.yml -i "$state/inventory.yml" --diff
