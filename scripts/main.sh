#!/usr/bin/env bash
# The main job on the built-in default: start a lab of simulated Proxmox VE nodes on loopback
# (one node with 8 simulated RTX PRO 6000 Blackwell GPUs on 127.0.100.1), run `gpuhost provision lxc`
# against it (host IOMMU and driver, reboot, a container with all 8 GPUs, the matching driver inside,
# and the checks), then `gpuhost launch sglang` in that container (profile glm5-nvfp4-tp8-sm120:
# validated, venv installed, started as a systemd unit, ready, smoke and canary passed). Both run a
# second time and must change nothing (changed=0).
# Needs root on Debian 12. Stop the lab with: .venv/bin/gpuhost lab down
# Environment: GPUHOST_LAB_STATE (default /run/gpuhost-lab), GPUHOST_LAB_ADDRESS (default 127.0.100.1).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
state=${GPUHOST_LAB_STATE:-/run/gpuhost-lab}
address=${GPUHOST_LAB_ADDRESS:-127.0.100.1}
gpuhost=${GPUHOST:-.venv/bin/gpuhost}
if ! $gpuhost lab status --state-dir "$state" >/dev/null 2>&1; then
  $gpuhost lab up --nodes 1 --gpus 8 --boot systemd-boot --cpu amd --state-dir "$state" --address "$address"
fi
inv=$state/inventory.yml
$gpuhost provision lxc -i "$inv" --allow-reboot --allow-restart
$gpuhost launch sglang -i "$inv" --allow-restart

# the second run of both: nothing changes
report=$(mktemp)
trap 'rm -f "$report"' EXIT
unchanged() {
  local what=$1; shift
  "$@" --json >"$report" || { cat "$report"; return 1; }
  python3 - "$report" "$what" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
changed = sum(h["changed"] for h in report["hosts"].values())
print(f"second run of gpuhost {sys.argv[2]}: changed={changed}")
sys.exit(0 if changed == 0 else 1)
PY
}
unchanged "provision lxc" $gpuhost provision lxc -i "$inv"
unchanged "launch sglang" $gpuhost launch sglang -i "$inv"
