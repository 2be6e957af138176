"""Command line of the probe: ``python3 -m gpuhost.probe`` (or the shipped ``probe.pyz``).

The JSON report goes to stdout (or ``--out``); progress goes to stderr.
Exit status: 0 measured, 2 cannot run here (no driver, no GPU...), 3 stopped by the deadline.
"""

from __future__ import annotations

import argparse
import sys

from .measure import Settings
from .report import Deadline, Probe


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="gpuhost-probe", description="Measure GPU host links and peer-to-peer copies.")
    p.add_argument("--size-mib", type=int, default=256, help="bytes per bandwidth copy, in MiB (default 256)")
    p.add_argument("--reps", type=int, default=4, help="copies per bandwidth sample (default 4)")
    p.add_argument("--lat-reps", type=int, default=100, help="16-byte copies per latency sample (default 100)")
    p.add_argument("--samples", type=int, default=5, help="timed samples per figure; the median is reported")
    p.add_argument(
        "--hold",
        choices=("auto", "kernel", "wait-value"),
        default="auto",
        help="how streams are held until all copies are queued",
    )
    p.add_argument("--devices", default=None, help="CUDA ordinals to use, e.g. 0,1 (default: all)")
    p.add_argument("--no-pairs", action="store_true", help="skip peer measurements")
    p.add_argument("--no-staged", action="store_true", help="skip the host-staged (peer access off) matrix")
    p.add_argument(
        "--nccl",
        choices=("auto", "off"),
        default="auto",
        help="auto: all-reduce check when torch imports and there are 2+ GPUs",
    )
    p.add_argument("--deadline-s", type=float, default=600.0, help="stop and print what was measured after this")
    p.add_argument("--out", default=None, help="write the JSON here instead of stdout")
    args = p.parse_args(argv)
    if args.size_mib <= 0 or args.reps <= 0 or args.lat_reps <= 0 or args.samples <= 0:
        p.error("sizes and counts must be positive")
    if args.lat_reps > 400:
        p.error("--lat-reps above 400 risks filling the driver's queue while the stream is held")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    settings = Settings(
        size_bytes=args.size_mib << 20, bw_reps=args.reps, lat_reps=args.lat_reps, samples=args.samples, hold=args.hold
    )
    devices = [int(x) for x in args.devices.split(",")] if args.devices else None
    probe = Probe(settings, devices=devices, pairs=not args.no_pairs, staged=not args.no_staged, nccl=args.nccl)

    def emit(text: str) -> None:
        if args.out:
            with open(args.out, "w") as f:
                f.write(text + "\n")
        else:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()

    deadline = Deadline(probe, args.deadline_s, emit)
    deadline.start()
    try:
        code = probe.run()
    except Exception as exc:  # the report must still come out, with what broke
        probe.error("probe", "%s: %s" % (type(exc).__name__, exc))
        probe.report["status"] = "cannot_run"
        code = 2
    deadline.cancel()
    emit(probe.snapshot())
    return code
