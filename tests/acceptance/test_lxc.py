"""The lxc part of the acceptance suite (see gpuhost.acceptance.suite)."""

from gpuhost.acceptance.suite.test_lxc import *  # noqa: F403
