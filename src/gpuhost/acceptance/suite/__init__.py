"""The acceptance suite a user runs against a real deployment (``gpuhost verify …`` or plain pytest).

Every test calls one named check of :mod:`gpuhost.checks` through the ``prove`` fixture and fails with
that check's finding; none re-implements a check.
"""
