"""Replaced in every wheel by the version it is built for."""

__version__ = "0.5.23"
