"""Benchmark online serving throughput (``python -m sglang.bench_serving``)."""

import sys
import warnings

from ._lab import bench

if __name__ == "__main__":
    if bench.NEW:
        warnings.warn(
            "`sglang.bench_serving` is deprecated and will be removed in a future release; use "
            "`sglang.benchmark.serving` instead (e.g. `python -m sglang.benchmark.serving`).",
            FutureWarning,
            stacklevel=1,
        )
    sys.exit(bench.run(sys.argv[1:]))
