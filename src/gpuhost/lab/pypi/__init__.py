"""The lab's offline Python package index (PEP 503 "simple" layout), built once per lab.

Every GPU node has it under :data:`index.NODE_DIR` and serves ``/srv/gpuhost-lab`` over HTTP on its
own address, port 3141 (a unit enabled at boot), so the node and its containers (same network, not
the same files) use ``pip install --index-url http://<node>:3141/pypi/simple`` (``uv pip install
--index-url`` too); the inventory gives each GPU node that URL as ``pip_index_url``. It holds
the stand-in ``sglang``, ``transformers``, ``torch`` and ``flashinfer-python`` wheels of
:mod:`gpuhost.lab.sglang.wheels`, and the real ``uv`` and ``huggingface_hub`` wheels (with its dependencies) from ``scripts/setup.sh``'s cache.
"""
