"""What the autoscaler knows about EC2 offline: node_config keys, user data, tag limits, and
the embedded local EC2 (moto's server)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from instance_catalog.catalog import Offer
from providers.aws.nodes import market_of
from providers.base import METADATA_CURL, Cloud, NodeTypeOffering, split_zones
from providers.catalog import catalog_entry

if TYPE_CHECKING:
    from instance_catalog.live_refresh import RefreshReport, RefreshRequest
from providers.errors import InvalidConfigError

NODE_IDENTITY_SCRIPT = (
    f"TOKEN=$({METADATA_CURL} -X PUT http://169.254.169.254/latest/api/token "
    '-H "X-aws-ec2-metadata-token-ttl-seconds: 300")\n'
    f'NODE_ID=$({METADATA_CURL} -H "X-aws-ec2-metadata-token: $TOKEN" '
    "http://169.254.169.254/latest/meta-data/instance-id)\n"
    "HOST=0\n"
)
"""IMDSv2: the instance id; an EC2 node has one host."""


RAY_DEFAULTS = {
    "available_node_types": {
        "ray.head.default": {"node_config": {"InstanceType": "m5.large"}},
        "ray.worker.default": {
            "min_workers": 0,
            "node_config": {
                "InstanceType": "m5.large",
                "InstanceMarketOptions": {"MarketType": "spot"},
            },
        },
    },
    "head_node_type": "ray.head.default",
}
"""Ray's ``autoscaler/aws/defaults.yaml`` node types."""


class AwsCloud(Cloud):
    name = "aws"
    provider_class = "providers.aws.provider:AwsNodeProvider"
    instance_type_field = "InstanceType"
    tag_value_limit = 256
    node_identity_script = NODE_IDENTITY_SCRIPT
    ray_defaults = RAY_DEFAULTS
    boot_data_limit = 16 * 1024  # "User data is limited to 16 KB", before base64 encoding
    boot_data_name = "EC2 user data"
    caches_stopped_nodes = True

    def catalog_offer(
        self, node_config: Mapping[str, Any], provider_config: Mapping[str, Any]
    ) -> Offer | None:
        name = node_config.get("InstanceType")
        if name is None:
            return None
        return Offer(catalog_entry(str(name), self.name, "InstanceType"))

    def offering(
        self, node_config: Mapping[str, Any], provider_config: Mapping[str, Any]
    ) -> NodeTypeOffering | None:
        name = node_config.get("InstanceType")
        if name is None:
            return None
        region = node_config.get("region") or provider_config.get("region")
        if region != provider_config.get("region"):
            raise InvalidConfigError(
                f"an AWS cluster launches in one region ({provider_config.get('region')}); "
                f"set the node type's availability_zone instead of region {region}",
                field="region",
            )
        subnets = node_config.get("SubnetId") or node_config.get("SubnetIds")
        zones = () if subnets else split_zones(zones_of(node_config, provider_config))
        return NodeTypeOffering(str(name), market_of(node_config), zones, region)

    def with_boot_script(self, node_config: Mapping[str, Any], script: str) -> dict[str, Any]:
        config = dict(node_config)
        config.setdefault("UserData", script)
        return config

    def auth_notes(
        self, node_type: str, node_config: Mapping[str, Any], public_key: str | None
    ) -> list[str]:
        if node_config.get("KeyName"):
            return []
        return [
            f"auth: node type {node_type} has no node_config.KeyName: its nodes get no EC2 key "
            "pair to ssh in with (set KeyName, the key pair of auth.ssh_private_key)"
        ]

    def refresh_catalog(self, request: RefreshRequest) -> RefreshReport:
        from instance_catalog.live_refresh import refresh_aws

        return refresh_aws(request)

    def emulator_settings(self) -> dict[str, Any]:
        # The local EC2 accepts any key; a machine without an account has none, and real
        # keys are never sent to it.
        return {"aws_access_key_id": "emulator", "aws_secret_access_key": "emulator"}


def zones_of(node_config: Mapping[str, Any], provider_config: Mapping[str, Any]) -> Any:
    """The node type's own ``availability_zone`` (a list in order), else the provider's."""
    return node_config.get("availability_zone") or provider_config.get("availability_zone")
