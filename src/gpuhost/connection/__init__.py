"""Connections: one protocol (:class:`~gpuhost.connection.base.Connection`), several transports
(:mod:`~gpuhost.connection.local`, :mod:`~gpuhost.connection.ssh`, :mod:`~gpuhost.connection.pct`).
Building one from an inventory entry is the runner's job (:mod:`gpuhost.runner.connect`)."""
