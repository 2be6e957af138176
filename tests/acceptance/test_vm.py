"""The vm part of the acceptance suite (see gpuhost.acceptance.suite)."""

from gpuhost.acceptance.suite.test_vm import *  # noqa: F403
