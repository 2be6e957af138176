"""Benchmark online serving throughput (``python -m sglang.benchmark.serving``)."""

import sys

from .._lab import bench

if __name__ == "__main__":
    sys.exit(bench.run(sys.argv[1:]))
