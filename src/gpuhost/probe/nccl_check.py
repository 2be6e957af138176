"""Optional NCCL all-reduce check, run only where the target's python3 can import torch.

One process per GPU (as serving engines run), started with the target's interpreter;
the probe itself never imports torch. Reports bus bandwidth for a large all-reduce
(nccl-tests' definition: algbw x 2(n-1)/n), the time of small all-reduces, and
whether the sum came out right.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

WORKER = r"""
import json, sys
import torch
import torch.distributed as dist

rank, world, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
torch.cuda.set_device(rank)
dist.init_process_group("nccl", init_method="tcp://127.0.0.1:" + port, rank=rank, world_size=world)

def timed_us(nbytes, iters, warmup):
    x = torch.ones(max(1, nbytes // 4), dtype=torch.float32, device="cuda")
    for _ in range(warmup):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    dist.barrier()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        dist.all_reduce(x)
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) / iters * 1e3

check = torch.full((1 << 20,), float(rank + 1), device="cuda")
dist.all_reduce(check)
expected = world * (world + 1) / 2.0
correct = bool(torch.all(check == expected).item())
big = 256 << 20
big_us = timed_us(big, 20, 5)
algbw = big / (big_us / 1e6) / 1e9
small = {str(n): round(timed_us(n, 100, 20), 2) for n in (8, 1024, 65536)}
if rank == 0:
    with open(out, "w") as f:
        json.dump({"world_size": world, "torch": torch.__version__,
                   "nccl": ".".join(str(v) for v in torch.cuda.nccl.version()),
                   "correct": correct, "bytes": big, "time_us": round(big_us, 1),
                   "algbw_gbps": round(algbw, 2), "busbw_gbps": round(algbw * 2 * (world - 1) / world, 2),
                   "small_latency_us": small}, f)
dist.destroy_process_group()
"""


def torch_gpu_count(python: str = sys.executable) -> int | None:
    """How many GPUs torch sees in the target's python3, or None if torch does not import."""
    try:
        out = subprocess.run(
            [python, "-c", "import torch; print(torch.cuda.device_count())"],
            capture_output=True,
            timeout=120,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    try:
        return int(out.stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_allreduce(world: int, timeout_s: float = 180.0, python: str = sys.executable) -> dict[str, Any]:
    """All-reduce over ``world`` local GPUs; a dict with the figures or with ``error``."""
    port = str(_free_port())
    fd, out_path = tempfile.mkstemp(prefix="gpuhost-nccl-", suffix=".json")
    os.close(fd)
    procs: list[subprocess.Popen[bytes]] = []
    started = time.monotonic()
    try:
        for rank in range(world):
            procs.append(
                subprocess.Popen(
                    [python, "-c", WORKER, str(rank), str(world), port, out_path],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                )
            )
        outputs = []
        for p in procs:
            left = max(1.0, timeout_s - (time.monotonic() - started))
            try:
                text, _ = p.communicate(timeout=left)
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                return {"error": "all-reduce did not finish within %.0f s (NCCL hang?)" % timeout_s}
            outputs.append((p.returncode, text.decode(errors="replace")))
        failed = [(rc, text) for rc, text in outputs if rc != 0]
        if failed:
            return {"error": "a worker exited %d: %s" % (failed[0][0], failed[0][1][-2000:])}
        with open(out_path) as f:
            result: dict[str, Any] = json.load(f)
        result["duration_s"] = round(time.monotonic() - started, 2)
        return result
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        try:
            os.unlink(out_path)
        except OSError:
            pass
