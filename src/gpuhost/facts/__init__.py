"""Facts: what a host is, read by parsing real command outputs and files.

Each fact is a :class:`~gpuhost.core.facts.Fact`: a read-only command and a pure parser of its
result. Operations ask for facts through ``HostContext.fact``, which runs the command once
and caches the value until the runner changes something; tests feed captured outputs to the
parser directly.
"""
