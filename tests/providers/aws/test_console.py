"""An instance's console output (GetConsoleOutput over moto's server): owned ones only."""

from __future__ import annotations

from tests.providers.aws.conftest import TAGS, Wire, node_config
from tests.providers.aws.test_ownership import outsider

MOTO_LAST_LINE = "Enabling fast FPU save and restore... done."


def test_an_owned_instance_shows_its_latest_console_output_decoded(provider, ami):
    (node_id,) = provider.create_node(node_config(ami), TAGS, 1, "req-1").node_ids
    wire = Wire(provider)

    output = provider.console_output(node_id)

    assert output.splitlines()[-1] == MOTO_LAST_LINE  # base64 on the wire, text here
    assert wire.sent["GetConsoleOutput"] == 1


def test_without_latest_output_the_buffered_output_is_read(provider, ami):
    (node_id,) = provider.create_node(node_config(ami), TAGS, 1, "req-1").node_ids
    wire = Wire(provider)
    wire.fail(
        lambda action, params: (
            "UnsupportedOperation"
            if action == "GetConsoleOutput" and params.get("Latest") == "true"
            else None
        )
    )

    assert provider.console_output(node_id).splitlines()[-1] == MOTO_LAST_LINE
    assert wire.sent["GetConsoleOutput"] == 2


def test_someone_elses_instance_is_never_read(provider, make_provider, ami, ec2):
    strangers = [
        outsider(ec2, ami),
        outsider(ec2, ami, {"accel-cluster-name": "beta"}),
        make_provider("beta").create_node(node_config(ami), TAGS, 1, "req-b").node_ids[0],
    ]
    wire = Wire(provider)

    assert [provider.console_output(i) for i in strangers] == [None, None, None]
    assert wire.sent["GetConsoleOutput"] == 0
