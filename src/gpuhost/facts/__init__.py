"""Facts: what a host is, read by parsing real command outputs and files.

A fact is a function ``fact(conn, *args) -> value``. Operations ask for facts through
``HostContext.fact`` which caches them per host until the runner changes something.
"""
