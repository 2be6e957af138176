"""The runner: checks the run whole (:mod:`~gpuhost.runner.prepare`), then for each host facts →
operations decide → actions applied (:mod:`~gpuhost.runner.run`); results in :mod:`~gpuhost.runner.results`."""
