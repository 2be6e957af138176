"""The lab's stand-in for SGLang and its companion packages.

:mod:`standin` holds the Python sources of a package that is installed as ``sglang`` (stdlib only,
relative imports): ``python -m sglang.launch_server`` parses argv with the pinned version's real
flag table (``gpuhost/serve/flags/sglang-<version>.json``, embedded into each wheel), prints
SGLang's log lines, serves its HTTP API on ``--host``/``--port`` and makes the simulated GPUs draw
power in proportion to its in-flight requests. :mod:`companions` holds the stand-ins for
``torch``, ``transformers`` and ``flashinfer-python``; :mod:`wheels` builds all of them;
:mod:`model` writes a tiny Hugging Face snapshot of GLM-5-NVFP4. :mod:`gpuhost.lab.pypi` publishes
the wheels on the lab's offline package index.

Lab controls inside the machine that runs the server (a node or a container), never used by
gpuhost itself: :data:`standin._lab.config.CONTROL_DIR` = ``/etc/gpuhost-lab/sglang`` with ``faults``
(one of ``nan-on-first-decode``, ``hang-cuda-graph``, ``hang-autotune``, ``garbage``, ``oom-on-load`` a line),
``delay_scale`` (start-up delays, 1.0 = about 4 s) and ``itl_ms`` (decode time per token, default 4),
or the environment variables ``GPUHOST_LAB_SGLANG_DELAY_SCALE`` and ``GPUHOST_LAB_SGLANG_ITL_MS``.
"""
