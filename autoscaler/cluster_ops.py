"""What the cluster commands do, apart from the CLI: open a cluster, preflight, create the head,
bring it up, wait for reports, build the status, tear it down.

The cloud's tags stay the truth: every function here lists the cluster's nodes from the
provider, so a deleted state folder loses history, never instances.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autoscaler.config import ClusterConfig
from autoscaler.lifecycle import ALLOCATED, TERMINATING
from autoscaler.offerings import UnavailableOfferings
from autoscaler.planner import Plan, plan
from autoscaler.planner.model import Demand
from autoscaler.reconciler import NodeView, Reconciler, TickResult
from autoscaler.state import (
    FAILED_INTENT,
    LAUNCHED_INTENT,
    PENDING_INTENT,
    Event,
    Intent,
    StateStore,
)
from providers.base import (
    NODE_KIND_HEAD,
    RUNNING,
    TAG_LAUNCH_REQUEST,
    TAG_NODE_KIND,
    TAG_NODE_TYPE,
    NodeProvider,
    ProviderNode,
)
from providers.errors import ProviderError
from providers.local_state import cluster_state_dir

logger = logging.getLogger(__name__)

DOWN_TIMEOUT_S = 900.0
POLL_S = 5.0
RECENT_FAILURES = 20


class ClusterError(Exception):
    """A cluster command cannot go on; the message says why."""


@dataclass
class Cluster:
    """One cluster's config, cloud and local state, opened together."""

    config: ClusterConfig
    provider: NodeProvider
    store: StateStore
    clock: Callable[[], float] = time.time

    @property
    def name(self) -> str:
        return self.config.spec.cluster_name

    def reconciler(self) -> Reconciler:
        return Reconciler(self.config, self.provider, self.store, self.clock)

    def close(self) -> None:
        self.store.close()


def state_path(cluster_name: str) -> Path:
    """The cluster's SQLite state file."""
    return cluster_state_dir(cluster_name) / "state.db"


def provider_config(config: ClusterConfig) -> dict[str, Any]:
    return config.spec.provider.model_dump(exclude_none=True)


def open_cluster(config: ClusterConfig, clock: Callable[[], float] = time.time) -> Cluster:
    """The cluster's provider (starting the embedded cloud if asked) and state store."""
    from providers import get_provider

    try:
        provider = get_provider(provider_config(config), config.spec.cluster_name)
    except ImportError as err:
        raise ClusterError(
            f"the {config.spec.provider.type} provider plugin cannot be loaded: {err}"
        ) from None
    return Cluster(config, provider, StateStore(state_path(config.spec.cluster_name)), clock)


# Demand -------------------------------------------------------------------------------------
def demand_body(demand: Demand) -> dict[str, Any]:
    """A parsed demand as the JSON the state store keeps (identical shapes merged)."""
    return {
        "bundles": [{"resources": dict(b.resources), "count": b.count} for b in demand.bundles],
        "placement_groups": [
            {"strategy": g.strategy, "bundles": [dict(b) for b in g.bundles], "count": g.count}
            for g in demand.placement_groups
        ],
    }


# Preflight ----------------------------------------------------------------------------------
def preflight(config: ClusterConfig, resolved: Mapping[str, Any] | None = None) -> list[str]:
    """Problems that would make launches fail, found with read-only (or dry-run) cloud calls.

    ``resolved`` is the provider config as the plugin got it (the emulator's endpoint filled).
    """
    settings = dict(resolved if resolved is not None else provider_config(config))
    if settings["type"] == "aws":
        return _preflight_aws(config, settings)
    return _preflight_gcp(config, settings)


def _preflight_aws(config: ClusterConfig, settings: dict[str, Any]) -> list[str]:
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    region = settings.get("region")
    if not region:
        return ["provider.region is required for AWS"]
    kwargs: dict[str, Any] = {"region_name": region, "endpoint_url": settings.get("endpoint_url")}
    if settings.get("emulator"):  # the local cloud takes any key; never send real ones to it
        kwargs.update(aws_access_key_id="emulator", aws_secret_access_key="emulator")
    elif boto3.Session().get_credentials() is None:
        return ["no AWS credentials found (environment, ~/.aws, SSO or an instance role)"]
    ec2 = boto3.client("ec2", **kwargs)
    node_configs = {name: t.node_config for name, t in config.spec.available_node_types.items()}
    problems: list[str] = []
    try:
        if not ec2.describe_regions(RegionNames=[region])["Regions"]:
            return [f"{region!r} is not an EC2 region"]
        zones = {z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"]}
    except (BotoCoreError, ClientError) as err:
        return [f"region {region!r} is not usable: {err}"]
    for zone in filter(None, str(settings.get("availability_zone", "")).split(",")):
        if zone.strip() not in zones:
            problems.append(f"availability zone {zone.strip()!r} is not in {region}")
    checks = (
        ("subnets", _missing_subnets),
        ("images", _missing_images),
        ("instance types", _unoffered_types),
        ("permissions", _dry_runs),
    )
    for what, check in checks:
        try:
            problems.extend(check(ec2, node_configs, region))
        except (BotoCoreError, ClientError) as err:
            problems.append(f"checking {what} failed: {err}")
    return problems


def _subnets_of(node_config: Mapping[str, Any]) -> list[str]:
    found = list(node_config.get("SubnetIds") or [])
    found += [node_config["SubnetId"]] if node_config.get("SubnetId") else []
    found += [n["SubnetId"] for n in node_config.get("NetworkInterfaces") or [] if "SubnetId" in n]
    return found


def _missing_subnets(ec2: Any, node_configs: Mapping[str, Mapping], region: str) -> list[str]:
    from botocore.exceptions import ClientError

    problems = []
    for subnet in sorted({s for c in node_configs.values() for s in _subnets_of(c)}):
        try:
            ec2.describe_subnets(SubnetIds=[subnet])
        except ClientError as err:
            if "NotFound" not in err.response["Error"]["Code"]:
                raise
            problems.append(f"subnet {subnet} does not exist in {region}")
    return problems


def _missing_images(ec2: Any, node_configs: Mapping[str, Mapping], region: str) -> list[str]:
    from botocore.exceptions import ClientError

    problems = []
    for image in sorted({c["ImageId"] for c in node_configs.values() if c.get("ImageId")}):
        try:
            found = ec2.describe_images(ImageIds=[image])["Images"]
        except ClientError as err:
            if not err.response["Error"]["Code"].startswith("InvalidAMIID"):
                raise
            found = []
        if not found:
            problems.append(f"image {image} does not exist in {region}")
    return problems


def _unoffered_types(ec2: Any, node_configs: Mapping[str, Mapping], region: str) -> list[str]:
    wanted = sorted({c["InstanceType"] for c in node_configs.values() if c.get("InstanceType")})
    if not wanted:
        return []
    offered: set[str] = set()
    pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
        LocationType="region", Filters=[{"Name": "instance-type", "Values": wanted}]
    )
    for page in pages:
        offered.update(o["InstanceType"] for o in page["InstanceTypeOfferings"])
    return [f"instance type {t} is not offered in {region}" for t in wanted if t not in offered]


def _dry_runs(ec2: Any, node_configs: Mapping[str, Mapping], region: str) -> list[str]:
    """``run_instances(DryRun=True)`` per node type: DryRunOperation means it would launch."""
    from botocore.exceptions import ClientError

    problems = []
    for name, node_config in node_configs.items():
        if not node_config.get("ImageId") or not node_config.get("InstanceType"):
            continue
        request = {
            "ImageId": node_config["ImageId"],
            "InstanceType": node_config["InstanceType"],
            "MinCount": 1,
            "MaxCount": 1,
        }
        subnets = _subnets_of(node_config)
        if subnets:
            request["SubnetId"] = subnets[0]
        try:
            ec2.run_instances(DryRun=True, **request)
        except ClientError as err:
            code, message = err.response["Error"]["Code"], err.response["Error"]["Message"]
            if code == "DryRunOperation":
                continue
            if code == "UnauthorizedOperation":
                problems.append(f"{name}: not allowed to launch (ec2:RunInstances): {message}")
            else:
                problems.append(f"{name}: a dry-run launch fails: {code}: {message}")
    return problems


def _preflight_gcp(config: ClusterConfig, settings: dict[str, Any]) -> list[str]:
    import requests
    from google.api_core.exceptions import GoogleAPICallError, RetryError
    from google.auth.exceptions import GoogleAuthError

    from providers.gcp_tpu.client import TpuApi
    from providers.gcp_tpu.errors import classify
    from providers.gcp_tpu.provider import launch_spec

    problems = []
    try:
        api = TpuApi(settings)
        next(iter(api.list_nodes()), None)
    except ProviderError as err:
        return [str(err)]
    except GoogleAuthError as err:
        return [f"no usable GCP credentials: {err}"]
    except (GoogleAPICallError, RetryError, requests.RequestException) as err:
        where = f"{settings.get('project_id')}/{settings.get('availability_zone')}"
        return [f"the Cloud TPU API does not answer for {where}: {classify(err)}"]
    for name, node_type in config.spec.available_node_types.items():
        node_config = dict(node_type.node_config)
        if node_type.market:
            node_config.setdefault("market", node_type.market)
        try:
            launch_spec(node_config, api.zone, {})
        except ProviderError as err:
            problems.append(f"{name}: {err}")
    return problems


# Head ---------------------------------------------------------------------------------------
def find_head(provider: NodeProvider) -> ProviderNode | None:
    heads = provider.nodes({TAG_NODE_KIND: NODE_KIND_HEAD})
    return min(heads, key=lambda n: (n.launched_at or 0.0, n.id)) if heads else None


def ensure_head(cluster: Cluster) -> tuple[ProviderNode | None, bool]:
    """The cluster's head node and whether it was created now (None without a head type)."""
    head_type = cluster.config.head_node_type
    if head_type is None:
        return None, False
    existing = find_head(cluster.provider)
    if existing is not None:
        return existing, False
    request_id = uuid.uuid4().hex
    now = cluster.clock()
    cluster.store.record_intent(Intent(request_id, head_type, 1, now, PENDING_INTENT))
    tags = {TAG_NODE_TYPE: head_type, TAG_NODE_KIND: NODE_KIND_HEAD, TAG_LAUNCH_REQUEST: request_id}
    try:
        # The reconciler's node_config: the market and the agent's boot script included.
        node_config = cluster.reconciler()._node_config(head_type)
        result = cluster.provider.create_node(node_config, tags, 1, request_id)
    except ProviderError as err:
        cluster.store.settle_intent(request_id, FAILED_INTENT, detail=str(err))
        _event(
            cluster,
            "failed",
            f"launch of head {head_type} failed: {err}",
            head_type,
            None,
            {
                "code": err.code,
                "kind": err.kind,
                "offering": str(err.offering) if err.offering else None,
            },
        )
        raise ClusterError(f"could not launch the head node ({head_type}): {err}") from None
    cluster.store.settle_intent(request_id, LAUNCHED_INTENT, result.node_ids)
    (head,) = result.nodes
    cluster.store.set_node_state(head.id, head_type, ALLOCATED, now)
    _event(
        cluster,
        "launched",
        f"launched head {head.id} ({head_type})",
        head_type,
        head.id,
        {"request_id": request_id, "node_ids": [head.id]},
    )
    return head, True


def _event(
    cluster: Cluster,
    kind: str,
    message: str,
    node_type: str | None,
    node_id: str | None,
    data: dict[str, Any] | None,
) -> None:
    logger.info("%s: %s", kind, message)
    cluster.store.add_event(Event(cluster.clock(), kind, message, node_type, node_id, data))


# Up -----------------------------------------------------------------------------------------
@dataclass
class UpResult:
    head: ProviderNode | None
    head_created: bool
    tick: TickResult


def preview(cluster: Cluster) -> dict[str, int]:
    """Units `up` would launch now, per node type (the head included when it is missing)."""
    reconciler = cluster.reconciler()
    counts = plan(reconciler.request(reconciler.sync())).launch_counts()
    head_type = cluster.config.head_node_type
    if head_type is not None and find_head(cluster.provider) is None:
        counts[head_type] = counts.get(head_type, 0) + 1
    return counts


def up(
    cluster: Cluster,
    config_path: Path | None = None,
    step: Callable[[str], None] = lambda _: None,
) -> UpResult:
    """Create or reuse the head, then one reconcile round (min_workers and recorded demand).

    An emulated cluster also gets its node simulator (started from ``config_path``)."""
    if cluster.config.spec.provider.emulator and config_path is not None:
        from autoscaler.simulator import ensure_simulator

        step("node simulator")
        ensure_simulator(config_path, cluster.name)
    step("head node")
    head, created = ensure_head(cluster)
    step("workers")
    return UpResult(head, created, cluster.reconciler().tick())


def wait_reported(
    reconciler: Reconciler,
    timeout_s: float,
    poll_s: float = POLL_S,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> tuple[bool, list[NodeView]]:
    """Tick until every live node has reported; (all reported, last views)."""
    deadline = monotonic() + timeout_s
    while True:
        views = reconciler.tick().nodes
        if all(v.reported for v in views if v.state != TERMINATING):
            return True, views
        remaining = deadline - monotonic()
        if remaining <= 0:
            return False, views
        sleep(min(poll_s, remaining))


def summarize(result: TickResult) -> str:
    """One line about a reconcile round."""
    states: dict[str, int] = {}
    for view in result.nodes:
        states[view.state] = states.get(view.state, 0) + 1
    parts = [
        f"nodes {len(result.nodes)}"
        + (f" ({', '.join(f'{n} {s}' for s, n in sorted(states.items()))})" if states else ""),
        "launched " + (", ".join(f"{n} x {t}" for t, n in result.launched.items()) or "0"),
        f"terminated {len(result.terminated)}",
        f"failures {len(result.failures)}",
        f"infeasible {sum(i.count for i in result.plan.infeasible)}",
        f"plan ${result.plan.cost_per_hour:.2f}/h",
        f"{result.seconds:.2f}s",
    ]
    return "; ".join(parts)


# Status -------------------------------------------------------------------------------------
def build_status(cluster: Cluster, events: bool = False) -> dict[str, Any]:
    """Nodes from the cloud, pending and infeasible demand, failures, blocked offerings, cost."""
    reconciler = cluster.reconciler()
    views = reconciler.sync()
    fresh = plan(reconciler.request(views))
    now = cluster.clock()
    prices = {t.name: t.price for t in cluster.config.node_types()}
    blocked = UnavailableOfferings(cluster.clock, cluster.store.offerings()).active()
    log = cluster.store.events(limit=1000)
    status: dict[str, Any] = {
        "cluster": cluster.name,
        "nodes": [_node_dict(view, now) for view in views],
        **_demand_dict(fresh),
        "failures": [_failure_dict(e) for e in log if e.kind == "failed"][-RECENT_FAILURES:],
        "unavailable_offerings": [
            {
                "offering": r.key,
                "kind": r.kind,
                "code": r.code,
                "detail": r.detail,
                "until": r.until,
                "expires_in_seconds": r.until - now,
            }
            for r in blocked
        ],
        "cost_per_hour": sum(
            prices.get(v.node_type) or 0.0 for v in views if v.node.state == RUNNING
        ),
    }
    if events:
        status["events"] = [_event_dict(e) for e in log]
    return status


def _node_dict(view: NodeView, now: float) -> dict[str, Any]:
    accelerators: dict[str, int] = {}
    for report in view.reports.values():
        for name, count in report.devices.items():
            accelerators[name] = accelerators.get(name, 0) + count
    idle_since = view.idle_since
    launched = view.node.launched_at or view.since
    return {
        "id": view.id,
        "node_type": view.node_type,
        "kind": view.kind,
        "state": view.state,
        "cloud_state": view.node.state,
        "accelerators": accelerators if view.reports else None,
        "internal_ips": [h.internal_ip for h in view.node.hosts if h.internal_ip],
        "external_ips": [h.external_ip for h in view.node.hosts if h.external_ip],
        "idle_seconds": None if idle_since is None else max(0.0, now - idle_since),
        "age_seconds": max(0.0, now - launched),
    }


def _demand_dict(fresh: Plan) -> dict[str, Any]:
    return {
        "pending": [
            {
                "node_type": launch.node_type,
                "count": launch.count,
                "reason": launch.reason,
                "serves": [{"resources": dict(r), "count": n} for r, n in launch.serves],
            }
            for launch in fresh.launches
        ],
        "deferred": [{"node_type": t, "count": n} for t, n in fresh.deferred],
        "infeasible": [
            {"resources": dict(i.resources), "count": i.count, "reason": i.reason}
            for i in fresh.infeasible
        ],
    }


def _failure_dict(event: Event) -> dict[str, Any]:
    data = event.data or {}
    return {
        "at": event.at,
        "node_type": event.node_type,
        "offering": data.get("offering"),
        "code": data.get("code"),
        "kind": data.get("kind"),
        "message": event.message,
    }


def _event_dict(event: Event) -> dict[str, Any]:
    return {
        "at": event.at,
        "kind": event.kind,
        "message": event.message,
        "node_type": event.node_type,
        "node_id": event.node_id,
    }


# Down ---------------------------------------------------------------------------------------
def doomed(provider: NodeProvider, keep_head: bool) -> list[ProviderNode]:
    """The owned nodes `down` terminates."""
    return [
        n
        for n in provider.nodes()
        if not (keep_head and n.tags.get(TAG_NODE_KIND) == NODE_KIND_HEAD)
    ]


def teardown(
    cluster: Cluster,
    keep_head: bool = False,
    timeout_s: float = DOWN_TIMEOUT_S,
    poll_s: float = POLL_S,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> list[str]:
    """Terminate every owned node (the head too unless kept), wait until the cloud lists none,
    clear the local state and stop the embedded cloud and its node simulator; returns the ids
    terminated."""
    deadline = monotonic() + timeout_s
    targets = [n.id for n in doomed(cluster.provider, keep_head)]
    if targets:
        cluster.provider.terminate_nodes(targets)
    left = _wait_gone(cluster.provider, targets, deadline, poll_s, sleep, monotonic)
    if left:
        raise ClusterError(
            f"{len(left)} node(s) still listed after {timeout_s:.0f}s: {', '.join(sorted(left))}; "
            "run `down` again"
        )
    cluster.store.clear()
    if cluster.config.spec.provider.emulator and not keep_head:
        from autoscaler.simulator import stop_simulator
        from providers.emulator import stop_emulator

        stop_simulator(cluster.name)
        stop_emulator(cluster.config.spec.provider.type, cluster.name)
    logger.info("cluster %s: terminated %d node(s)", cluster.name, len(targets))
    return targets


def _wait_gone(
    provider: NodeProvider,
    targets: Iterable[str],
    deadline: float,
    poll_s: float,
    sleep: Callable[[float], None],
    monotonic: Callable[[], float],
) -> set[str]:
    wanted = set(targets)
    while True:
        left = wanted & {n.id for n in provider.nodes()}
        remaining = deadline - monotonic()
        if not left or remaining <= 0:
            return left
        sleep(min(poll_s, remaining))
