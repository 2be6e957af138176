import pytest

from gpuhost.redact import forget_all


@pytest.fixture(autouse=True)
def _no_leftover_secrets():
    yield
    forget_all()
