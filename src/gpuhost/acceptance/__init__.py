"""The acceptance suite: the proofs ``gpuhost verify`` runs, with and without pytest, and its pytest-testinfra side.

* :mod:`gpuhost.acceptance.proof` and :mod:`gpuhost.acceptance.proofs`: the proofs of each ``verify`` kind, as
  data (the reads each subject needs, and one named check per proof);
* :mod:`gpuhost.acceptance.plain`: ``gpuhost verify host|lxc|vm|serve`` runs them without pytest;
* :mod:`gpuhost.acceptance.suite` and :mod:`gpuhost.acceptance.plugin`: the same proofs as pytest tests
  (``--gpuhost-inventory``, fixtures), run in-process by :mod:`gpuhost.acceptance.pytest_run` for ``--junit-xml``
  or ``-v``, or by plain pytest;
* :mod:`gpuhost.acceptance.backend`: testinfra backends for the ``gpuhost://NODE`` (the node over
  gpuhost's verified SSH), ``pct://NODE/CTID`` and ``qm-guest://NODE/VMID`` schemes;
* :mod:`gpuhost.acceptance.connections`: the connections they all share, one per node and VM guest.
"""
