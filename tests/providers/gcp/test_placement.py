"""Where a GCP node type launches: its own region and zones over the provider's, checked
against the catalog at load, with the field and the places that have it named."""

from __future__ import annotations

import pytest

from providers import cloud_for
from providers.errors import InvalidConfigError
from providers.gcp.compute.machine import GPU_FIELD
from providers.gcp.placement import placement

GCP = cloud_for("gcp")
PROVIDER = {"region": "us-central2", "availability_zone": "us-central2-b"}


def test_node_types_without_their_own_zones_use_the_providers():
    offering = GCP.offering({"acceleratorType": "v4-8"}, PROVIDER)

    assert (offering.region, offering.zones) == ("us-central2", ("us-central2-b",))


def test_a_node_types_own_zones_win_in_order_and_set_the_price_region():
    node = {"acceleratorType": "v6e-8", "availability_zone": ["us-east5-b", "us-east5-a"]}

    offering = GCP.offering(node, PROVIDER)

    assert (offering.region, offering.zones) == ("us-east5", ("us-east5-b", "us-east5-a"))


def test_a_node_types_own_region_alone_tries_every_zone_of_it_that_offers_the_type():
    offering = GCP.offering({"acceleratorType": "v6e-8", "region": "us-east5"}, PROVIDER)

    assert offering.zones == ("us-east5-a", "us-east5-b", "us-east5-c")  # the bundled snapshot


def test_a_zone_that_does_not_offer_the_type_names_the_field_and_the_zones_that_do():
    offered = {"us-east5": ("us-east5-a", "us-east5-b")}
    node = {"acceleratorType": "v6e-8", "availability_zone": ["us-east5-c"]}

    with pytest.raises(InvalidConfigError, match="us-east5-a, us-east5-b") as caught:
        placement(node, PROVIDER, offered, "v6e-8", "acceleratorType")  # facts from the API

    assert caught.value.field == "acceleratorType"


def test_a_zone_missing_from_googles_pages_is_a_warning_not_an_error():
    node = {"acceleratorType": "v7x-8", "availability_zone": ["us-central1-a"]}

    offering = GCP.offering(node, PROVIDER)  # the snapshot lacks v7x: zones from Google's pages

    assert offering.zones == ("us-central1-a",)
    (note,) = offering.notes
    assert "us-central1-a" in note and "us-central1-c" in note


def test_a_made_up_region_names_the_provider_field():
    with pytest.raises(InvalidConfigError, match="not a GCP region") as caught:
        GCP.offering({"acceleratorType": "v6e-8"}, {"availability_zone": "nowhere-1a"})

    assert caught.value.field == "provider.availability_zone"


def test_a_region_without_the_type_names_the_regions_that_have_it():
    with pytest.raises(InvalidConfigError, match="us-central2") as caught:
        GCP.offering({"acceleratorType": "v5litepod-8"}, PROVIDER)

    assert caught.value.field == "acceleratorType"
    assert "us-east5" in str(caught.value)


def test_an_attached_gpu_not_offered_in_a_named_zone_names_the_field_and_its_zones():
    offered = {"us-central1": ("us-central1-a", "us-central1-b")}
    node = {"availability_zone": ["us-central1-f"]}

    with pytest.raises(InvalidConfigError, match="us-central1-a, us-central1-b") as caught:
        placement(node, {}, offered, "nvidia-tesla-t4", GPU_FIELD)

    assert caught.value.field == "guestAccelerators[0].acceleratorType"


def test_prices_alone_do_not_prove_a_type_is_missing_from_a_region():
    assert placement({"region": "us-central2"}, {}, {"us-central1": ()}, "n1", "machineType") == (
        "us-central2",
        (),
    )


def test_a_zone_outside_the_region_is_refused():
    with pytest.raises(InvalidConfigError) as caught:
        GCP.offering(
            {
                "acceleratorType": "v4-8",
                "region": "us-central2",
                "availability_zone": ["us-east5-a"],
            },
            {},
        )

    assert caught.value.field == "availability_zone"
