"""`gpuhost verify p2p` on a lab node without a CUDA driver: a clear 'cannot run' (exit 2)."""

import pytest

from tests.integration.provision.conftest import gpuhost

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def lab(make_lab):
    return make_lab([("grub", "intel")])


def test_node_without_cuda_driver_cannot_run(lab):
    r = gpuhost("verify", "p2p", "--host", "pve1", "-i", str(lab.inventory))
    assert r.returncode == 2, r.stdout + r.stderr
    out = r.stdout + r.stderr
    assert "CANNOT RUN" in out
    assert "libcuda.so.1" in out
    assert "NVML" in out
