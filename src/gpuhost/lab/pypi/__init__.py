"""The lab's offline Python package index (PEP 503 "simple" layout), built once per lab.

Nodes and their containers see it at :data:`index.NODE_DIR` and use it as
``pip install --index-url file:///srv/gpuhost-lab/pypi/simple`` (``uv pip install --index-url`` too):
the stand-in ``sglang``, ``transformers``, ``torch`` and ``flashinfer-python`` wheels of
:mod:`gpuhost.lab.sglang.wheels`, and the real ``uv`` wheel from ``scripts/setup.sh``'s cache.
"""
