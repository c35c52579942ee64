"""A node advertises exactly what the catalog promised, for every accelerator instance type.

Each accelerator offer of the catalog (built-in accelerators, GPUs attached to GCE N1, every
TPU slice type) becomes the simulated host the local cloud boots for it; the real detection
code reads that host, and what it advertises must equal ``catalog show``'s resources. A TPU
host also advertises its slice's own name (as Ray's TPU detection does), which no catalog
entry can know in advance.
"""

from __future__ import annotations

import pytest

from accel.node import detect_node
from accel.probe import HOST_ROOT_ENV_VAR, HostProbe
from instance_catalog.catalog import load_catalog
from providers.local.hosts import build, host_probe
from providers.local.simulator import simulated_hosts

SLICE_NAME = "my-slice"


def _accelerator_offers():
    catalog = load_catalog()
    return [
        pytest.param(offer, id=f"{offer.instance_type.cloud}:{offer.label}")
        for offer in catalog.offers(include_unavailable=True)
        if offer.accelerator is not None
    ]


def advertised(offer, host_index: int, tmp_path) -> tuple[dict, dict]:
    """(what the simulated host's detection advertises, what the catalog promises)."""
    from instance_catalog.resources import resources_for

    hosts = simulated_hosts(offer.instance_type, SLICE_NAME, offer.attached)
    host = hosts[host_index]
    env = build(tmp_path / f"host-{host_index}", host)
    found = dict(detect_node(host_probe(env)).resources)
    if host.tpu_slice_name:
        assert found.pop(host.tpu_slice_name) == 1.0
    return found, resources_for(offer.instance_type, offer.attached, tpu_worker=host_index)


@pytest.mark.parametrize("offer", _accelerator_offers())
def test_every_accelerator_type_advertises_what_the_catalog_promises(offer, tmp_path):
    hosts = offer.instance_type.tpu.hosts if offer.instance_type.tpu else 1
    for host_index in sorted({0, hosts - 1}):
        found, promised = advertised(offer, host_index, tmp_path)
        assert found == promised, f"host {host_index} of {offer.label}"


def test_a_simulated_tpu_host_tells_its_slice_as_gke_does_without_a_metadata_server(tmp_path):
    """Each host of a simulated slice carries the GKE ``TPU_*`` variables, topology included:
    detection never falls back to the GCE metadata server, which a simulated host lacks (its
    name lookup alone took seconds where there is no network)."""
    offer = next(o for o in load_catalog().offers("gcp") if o.label == "v4-16")
    asked: list[str] = []
    for host in simulated_hosts(offer.instance_type, SLICE_NAME):
        env = build(tmp_path / f"host-{host.tpu_worker_id}", host)
        probe = HostProbe(
            root=env[HOST_ROOT_ENV_VAR],
            env=env,
            metadata_reader=lambda path, timeout: asked.append(path),
        )
        (tpu,) = detect_node(probe).detections
        assert tpu.labels["ray.io/tpu-topology"] == offer.instance_type.tpu.topology == "2x2x2"
        assert tpu.labels["ray.io/tpu-worker-id"] == str(host.tpu_worker_id)
    assert asked == []


def test_the_walk_covers_the_families_that_were_missed():
    labels = {p.values[0].label for p in _accelerator_offers()}
    for name in ("trn2.48xlarge", "trn2u.48xlarge", "g6f.large", "gr6f.4xlarge", "g4ad.xlarge"):
        assert name in labels
    assert any(
        p.values[0].instance_type.tpu and p.values[0].instance_type.tpu.hosts > 1
        for p in _accelerator_offers()
    )


def test_trn2_promises_logical_neuroncores_at_the_default_lnc():
    resources = load_catalog().get("trn2.48xlarge", "aws")
    assert resources.accelerator.cores_per_device == 4
    assert resources.accelerator.memory_mib == 96 * 1024


def test_a_node_set_to_lnc_1_advertises_every_physical_core(tmp_path):
    offer = next(o for o in load_catalog().offers("aws") if o.label == "trn2.48xlarge")
    (host,) = simulated_hosts(offer.instance_type, "n")
    env = build(tmp_path, host)
    default = detect_node(host_probe(env)).resources["neuron_cores"]
    lnc1 = detect_node(host_probe({**env, "NEURON_LOGICAL_NC_CONFIG": "1"}))
    assert (default, lnc1.resources["neuron_cores"]) == (64, 128)


def test_a_partitioned_gpu_is_a_share_with_its_own_token_only(tmp_path):
    offer = next(o for o in load_catalog().offers("aws") if o.label == "g6f.large")
    (host,) = simulated_hosts(offer.instance_type, "n")
    found = detect_node(host_probe(build(tmp_path, host))).resources
    assert found["GPU"] == 0.125
    assert "accelerator_type:L4-PARTITIONED" in found
    assert "accelerator_type:L4" not in found
