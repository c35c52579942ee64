"""The catalog loads a cloud's types only when that cloud is asked for, once."""

from __future__ import annotations

import pytest

from instance_catalog.catalog import Catalog, UnknownInstanceTypeError
from instance_catalog.model import InstanceType


def _types(cloud: str, *names: str) -> list[InstanceType]:
    return [InstanceType(name=n, cloud=cloud, vcpus=4, memory_mib=16_384) for n in names]


def test_a_cloud_loads_when_first_asked_for_and_only_once():
    loaded = []

    def loader(cloud, *names):
        def load():
            loaded.append(cloud)
            return _types(cloud, *names)

        return load

    catalog = Catalog({"aws": loader("aws", "m5.xlarge"), "gcp": loader("gcp", "n2-standard-4")})
    assert catalog.get("m5.xlarge", "aws").name == "m5.xlarge"
    assert catalog.get("m5.xlarge", "aws").cloud == "aws"
    assert loaded == ["aws"]
    assert [e.name for e in catalog.entries()] == ["m5.xlarge", "n2-standard-4"]
    assert loaded == ["aws", "gcp"]


def test_a_name_on_no_cloud_is_looked_up_cloud_by_cloud_with_closest_names():
    catalog = Catalog({"aws": lambda: _types("aws", "m5.xlarge"), "gcp": lambda: []})
    assert catalog.get("m5.xlarge").cloud == "aws"
    with pytest.raises(UnknownInstanceTypeError, match=r"closest: m5\.xlarge"):
        catalog.get("m5.xlarg", "aws")
    assert catalog.entries("azure") == []
