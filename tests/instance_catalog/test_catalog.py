"""The catalog loads a cloud's types only when that cloud is asked for, once, and builds
a type only when it is looked up."""

from __future__ import annotations

import pytest

from instance_catalog.built_on_demand import BuiltOnDemand
from instance_catalog.catalog import Catalog, UnknownInstanceTypeError
from instance_catalog.model import InstanceType


def _type(name: str, cloud: str = "aws") -> InstanceType:
    return InstanceType(name=name, cloud=cloud, vcpus=4, memory_mib=16_384)


def test_a_cloud_loads_when_first_asked_for_and_only_once():
    loaded = []

    def loader(cloud, name):
        def load():
            loaded.append(cloud)
            return {name: _type(name, cloud)}

        return load

    catalog = Catalog({"aws": loader("aws", "m5.xlarge"), "gcp": loader("gcp", "n2-standard-4")})
    assert catalog.get("m5.xlarge", "aws").name == "m5.xlarge"
    assert catalog.get("m5.xlarge", "aws").cloud == "aws"
    assert loaded == ["aws"]
    assert [e.name for e in catalog.entries()] == ["m5.xlarge", "n2-standard-4"]
    assert loaded == ["aws", "gcp"]


def test_types_are_built_when_looked_up_and_listed_in_their_order():
    built = []

    def build(name):
        built.append(name)
        return _type(name)

    catalog = Catalog({"aws": lambda: BuiltOnDemand(["m5.xlarge", "c5.large"], build)})
    assert catalog.get("c5.large", "aws").name == "c5.large"
    assert catalog.get("c5.large").name == "c5.large"
    assert built == ["c5.large"]
    assert [e.name for e in catalog.entries("aws")] == ["m5.xlarge", "c5.large"]
    assert built == ["c5.large", "m5.xlarge"]


def test_an_unknown_name_gets_the_closest_names_and_an_unknown_cloud_has_none():
    catalog = Catalog({"aws": lambda: BuiltOnDemand(["m5.xlarge"], _type), "gcp": dict})
    with pytest.raises(UnknownInstanceTypeError, match=r"closest: m5\.xlarge"):
        catalog.get("m5.xlarg", "aws")
    assert catalog.entries("azure") == []
