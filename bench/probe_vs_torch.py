"""The probe against torch's own copies, on the same GPUs, in one run.

    python3 bench/probe_vs_torch.py --gpus 0          # H2D, D2H, local D2D
    python3 bench/probe_vs_torch.py --gpus 0,1        # also peer copies both ways

Runs the probe (``python3 -m gpuhost.probe`` from this checkout) in a subprocess,
then times torch's ``Tensor.copy_`` for the same sizes and counts with CUDA events,
and prints each figure with the probe/torch ratio. ``--out FILE`` also writes JSON.
Both count GB as 1e9 bytes and a copy's bytes once.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_probe(gpus: list[int], size_mib: int, reps: int, samples: int) -> tuple[dict[str, Any], float]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [
        sys.executable,
        "-m",
        "gpuhost.probe",
        "--devices",
        ",".join(map(str, gpus)),
        "--size-mib",
        str(size_mib),
        "--reps",
        str(reps),
        "--samples",
        str(samples),
        "--nccl",
        "off",
    ]
    start = time.monotonic()
    out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, check=False)
    wall = time.monotonic() - start
    report = json.loads(out.stdout)
    if out.returncode != 0:
        raise SystemExit(f"probe exited {out.returncode}: {report.get('errors')}")
    return report, wall


def torch_series(torch: Any, device: int, fn: Callable[[], None], reps: int, samples: int) -> list[float]:
    """Milliseconds of ``reps`` calls of ``fn``, per sample, timed on ``device``'s current stream."""
    with torch.cuda.device(device):
        fn()
        torch.cuda.synchronize()
        out = []
        for _ in range(samples):
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                fn()
            stop.record()
            stop.synchronize()
            out.append(start.elapsed_time(stop))
        return out


def gbps(nbytes: int, reps: int, ms_samples: list[float]) -> float:
    return nbytes * reps / (statistics.median(ms_samples) / 1e3) / 1e9


def torch_figures(gpus: list[int], size: int, reps: int, samples: int) -> dict[str, float]:
    import torch

    out: dict[str, float] = {}
    host = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    host_back = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    bufs = {
        g: (
            torch.randint(0, 255, (size,), dtype=torch.uint8, device=f"cuda:{g}"),
            torch.empty(size, dtype=torch.uint8, device=f"cuda:{g}"),
        )
        for g in gpus
    }
    for g in gpus:
        src, dst = bufs[g]
        out[f"GPU{g} h2d"] = gbps(
            size, reps, torch_series(torch, g, lambda dst=dst: dst.copy_(host, non_blocking=True), reps, samples)
        )
        out[f"GPU{g} d2h"] = gbps(
            size, reps, torch_series(torch, g, lambda src=src: host_back.copy_(src, non_blocking=True), reps, samples)
        )
        out[f"GPU{g} d2d"] = gbps(
            size,
            reps,
            torch_series(torch, g, lambda src=src, dst=dst: dst.copy_(src, non_blocking=True), reps, samples),
        )
    for i in gpus:
        for j in gpus:
            if i == j:
                continue
            src, dst = bufs[i][0], bufs[j][1]
            out[f"GPU{i}->GPU{j} peer"] = gbps(
                size,
                reps,
                torch_series(torch, i, lambda src=src, dst=dst: dst.copy_(src, non_blocking=True), reps, samples),
            )
            ok = torch.equal(dst.cpu(), src.cpu())
            out[f"GPU{i}->GPU{j} torch data equal"] = float(ok)
    return out


def probe_figures(report: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for gpu in report["gpus"]:
        local = gpu.get("local") or {}
        for key in ("h2d", "d2h", "d2d"):
            if key in local:
                out[f"GPU{gpu['index']} {key}"] = local[key]["value"]
    for pair in report["pairs"]:
        p2p = pair.get("p2p") or pair.get("staged") or {}
        if "uni" in p2p:
            out[f"GPU{pair['src']}->GPU{pair['dst']} peer"] = p2p["uni"]["value"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", default="0")
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    gpus = [int(g) for g in args.gpus.split(",")]

    report, probe_wall = run_probe(gpus, args.size_mib, args.reps, args.samples)
    probe = probe_figures(report)
    torch_fig = torch_figures(gpus, args.size_mib << 20, args.reps, args.samples)

    rows = []
    print(f"{'figure':<22} {'probe GB/s':>11} {'torch GB/s':>11} {'ratio':>7}")
    for key, tval in torch_fig.items():
        if key.endswith("data equal"):
            continue
        pval = probe.get(key)
        ratio = pval / tval if pval is not None and tval else None
        rows.append(
            {
                "figure": key,
                "probe_gbps": pval,
                "torch_gbps": round(tval, 2),
                "ratio": round(ratio, 3) if ratio is not None else None,
            }
        )
        print(
            f"{key:<22} {pval if pval is not None else float('nan'):>11.2f} {tval:>11.2f} "
            f"{ratio if ratio is not None else float('nan'):>7.3f}"
        )
    print(f"probe wall time: {probe_wall:.2f} s (report duration {report.get('duration_s')} s)")
    if args.out:
        Path(args.out).write_text(
            json.dumps(
                {
                    "rows": rows,
                    "probe_wall_s": round(probe_wall, 2),
                    "torch_checks": {k: v for k, v in torch_fig.items() if k.endswith("data equal")},
                    "probe_report": report,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
