"""One model of a check: pure functions from typed facts to :class:`Finding` objects.

A *check* reads facts it is given (never a connection) and returns findings. Every
caller — the provision roles' final verification, ``gpuhost verify host|lxc|p2p``, the
acceptance suite, ``doctor`` and SGLang readiness — runs the same functions and judges
by the same levels.

Each check is registered once with :func:`check` (name, title, what a failure means),
so the docs build and the tests can list every finding gpuhost can emit.
"""

from gpuhost.checks.finding import CheckInfo, Finding, Level, check, registered, worst

__all__ = ["CheckInfo", "Finding", "Level", "check", "registered", "worst"]
