"""The serve part of the acceptance suite (see gpuhost.acceptance.suite)."""

from gpuhost.acceptance.suite.test_serve import *  # noqa: F403
