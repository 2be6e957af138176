"""The lab's stand-in for the Hugging Face Hub's HTTP API (stdlib only), served on each GPU node.

:mod:`server` is one file copied to the node and run by a unit enabled at boot (:mod:`seed`), on the node's
own address, port :data:`seed.PORT`. It answers the endpoints ``huggingface_hub``'s ``snapshot_download``
calls with ``endpoint=`` (or ``HF_ENDPOINT``): ``GET /api/models/{repo}[/revision/{rev}]`` (the commit and the
siblings with sizes and LFS sha256), ``GET /api/models/{repo}/tree/{rev}`` (the recursive listing), and
``HEAD``/``GET /{repo}/resolve/{rev}/{file}`` with ``X-Repo-Commit``, ``ETag``, ``X-Linked-Etag``,
``X-Linked-Size`` and byte ranges (a download resumes). The repository is the lab's tiny GLM-5-NVFP4 snapshot
(:mod:`gpuhost.lab.sglang.model`) under its model id, with real sizes and sha256.

Lab controls on the node, never used by gpuhost: ``/etc/gpuhost-lab/hfhub/token`` (when it exists, every request
needs ``Authorization: Bearer <that token>``, as a gated repository does) and ``/etc/gpuhost-lab/hfhub/drop_after``
(N: the first full download of each file is cut off after N bytes, so the client must resume with a byte range)
and ``/etc/gpuhost-lab/hfhub/rate`` (bytes per second a file is sent at). Each request is logged (method, path, status, ``Range``;
never the token) to :data:`seed.REQUEST_LOG` on the node.
"""
