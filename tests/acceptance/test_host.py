"""The host part of the acceptance suite (see gpuhost.acceptance.suite)."""

from gpuhost.acceptance.suite.test_host import *  # noqa: F403
