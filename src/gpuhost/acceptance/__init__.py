"""The acceptance suite: pytest-testinfra over gpuhost's own connections, and the proofs it runs.

* :mod:`gpuhost.acceptance.backend`: testinfra backends for the ``gpuhost://NODE`` (the node over
  gpuhost's verified SSH), ``pct://NODE/CTID`` and ``qm-guest://NODE/VMID`` schemes;
* :mod:`gpuhost.acceptance.plugin`: the pytest plugin (``--gpuhost-inventory``, fixtures);
* :mod:`gpuhost.acceptance.suite`: the tests a user runs against a real deployment;
* :mod:`gpuhost.acceptance.run`: ``gpuhost verify host|lxc`` runs that suite in-process.
"""
