import pytest

from tests.fakes.host import FakeHost


@pytest.fixture
def fake_host(tmp_path) -> FakeHost:
    """An empty fake host: no devices, no commands, no NVML, no metadata server."""
    return FakeHost(tmp_path / "host")
