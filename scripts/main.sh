#!/usr/bin/env bash
# The main job on the built-in default: start a lab of simulated Proxmox VE nodes on loopback
# (one node with 8 simulated RTX PRO 6000 Blackwell GPUs on 127.0.100.1) and run
# `gpuhost provision lxc` against it: host IOMMU and driver, reboot, a container with all 8 GPUs,
# the matching driver inside, and the checks. Run it twice: the second run changes nothing.
# Needs root on Debian 12. Stop the lab with: .venv/bin/gpuhost lab down
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
state=/run/gpuhost-lab
if ! .venv/bin/gpuhost lab status --state-dir "$state" >/dev/null 2>&1; then
  .venv/bin/gpuhost lab up --nodes 1 --gpus 8 --boot systemd-boot --cpu amd --state-dir "$state"
fi
.venv/bin/gpuhost provision lxc -i "$state/inventory.yml" --allow-reboot --allow-restart
