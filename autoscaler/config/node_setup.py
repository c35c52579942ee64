"""How Ray's cluster launcher sets a node up, read from the cluster YAML: for one node type
as head or worker, its ``initialization_commands``, ``docker`` container, setup commands,
Ray start commands and ``file_mounts``, with a node type's own keys over the cluster's
exactly as Ray merges them. The boot script (``autoscaler.bootstrap``) runs them in Ray's
order.

A YAML written for Ray's launcher (Ray's setup keys, a head node type) but without Ray start
commands gets Ray's default ones, as Ray fills them from its ``defaults.yaml``; a YAML with
Ray start commands needs no ``ray_start`` key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from autoscaler.config.errors import ConfigProblem

RAY_DEFAULT_START = {
    "head_start_ray_commands": [
        "ray stop",
        "ray start --head --port=6379 --object-manager-port=8076 "
        "--autoscaling-config=~/ray_bootstrap_config.yaml --dashboard-host=0.0.0.0",
    ],
    "worker_start_ray_commands": [
        "ray stop",
        "ray start --address=$RAY_HEAD_IP:6379 --object-manager-port=8076",
    ],
}
"""Ray's ``defaults.yaml`` start commands (the same for AWS and GCP)."""
LAUNCHER_KEYS = (
    "initialization_commands",
    "setup_commands",
    "head_setup_commands",
    "worker_setup_commands",
    "docker",
    "file_mounts",
)
"""Keys that say a YAML was written for Ray's cluster launcher."""


@dataclass(frozen=True)
class DockerSetup:
    """The one long-running container a node's setup and Ray run in."""

    image: str
    container_name: str
    pull_before_run: bool = True
    run_options: tuple[str, ...] = ()
    size_shm: bool = True
    """Size ``/dev/shm`` for Ray (unless the user's options or Ray's switch do)."""
    pass_devices: bool = True
    """Pass the detected accelerators through (unless Ray's switch turns it off)."""


@dataclass(frozen=True)
class NodeSetup:
    """Everything Ray's launcher would run on one node, in the order it runs it."""

    initialization_commands: tuple[str, ...] = ()
    """On the host, before the container."""
    docker: DockerSetup | None = None
    setup_commands: tuple[str, ...] = ()
    """``setup_commands`` then the head's or worker's own, in the container if any."""
    start_ray_commands: tuple[str, ...] = ()
    file_mounts: Mapping[str, str] = field(default_factory=dict)
    """Remote path -> local path, written before the setup commands."""

    @property
    def starts_ray(self) -> bool:
        return any("ray start" in " ".join(line.split()) for line in self.start_ray_commands)


def node_setup(spec: Any, node_type: str, head: bool) -> NodeSetup:
    """How ``node_type`` of ``spec`` (a ``ClusterSpec``) is set up as head or worker.
    Raises :class:`ConfigProblem` for a container without an image."""
    own = spec.available_node_types[node_type]
    init = own.initialization_commands
    if init is None:
        init = spec.initialization_commands
    role = spec.head_setup_commands if head else own.worker_setup_commands
    if not head and role is None:
        role = spec.worker_setup_commands
    start = spec.head_start_ray_commands if head else spec.worker_start_ray_commands
    return NodeSetup(
        initialization_commands=tuple(init or ()),
        docker=_docker(
            f"available_node_types.{node_type}.docker" if own.docker is not None else "docker",
            {**_set(spec.docker), **_set(own.docker)},
            head,
        ),
        setup_commands=tuple(spec.setup_commands or ()) + tuple(role or ()),
        start_ray_commands=tuple(start or ()),
        file_mounts=dict(spec.file_mounts or {}),
    )


def _set(docker: Any) -> dict[str, Any]:
    """The keys a ``docker`` section sets (Ray's update merge: a node type's over the
    cluster's)."""
    return docker.model_dump(exclude_unset=True) if docker is not None else {}


def _docker(where: str, docker: Mapping[str, Any], head: bool) -> DockerSetup | None:
    """Ray's rule: a container runs when ``container_name`` is set; ``where``: the field path
    a problem is reported at (the node type's own ``docker``, else the cluster's)."""
    name = docker.get("container_name")
    if not name:
        return None
    role = "head" if head else "worker"
    image = docker.get(f"{role}_image") or docker.get("image")
    if not image:
        raise ConfigProblem(
            where,
            f"container_name {name!r} needs image (or {role}_image)",
        )
    options = [*(docker.get("run_options") or ()), *(docker.get(f"{role}_run_options") or ())]
    return DockerSetup(
        image=str(image),
        container_name=str(name),
        pull_before_run=next(
            (docker[k] for k in ("pull_before_run", "pull") if docker.get(k) is not None), True
        ),
        run_options=tuple(str(option) for option in options),
        size_shm=not docker.get("disable_shm_size_detection")
        and not any("--shm-size" in str(option) for option in options),
        pass_devices=not docker.get("disable_automatic_runtime_detection"),
    )


def with_ray_start(data: Mapping[str, Any], warnings: list[str]) -> dict[str, Any]:
    """``data`` with Ray's default start commands where Ray's launcher would fill them, and
    ``ray_start`` on node types that Ray start commands start (unless set)."""
    data = dict(data)
    node_types = data.get("available_node_types")
    if not isinstance(node_types, Mapping):
        return data
    starts = [key for key in RAY_DEFAULT_START if data.get(key)]
    launcher = any(data.get(key) for key in LAUNCHER_KEYS) and data.get("head_node_type")
    explicit = any(isinstance(t, Mapping) and "ray_start" in t for t in node_types.values())
    if not starts and launcher and not explicit:
        data.update(
            {key: list(lines) for key, lines in RAY_DEFAULT_START.items() if key not in data}
        )
        starts = list(RAY_DEFAULT_START)
        warnings.append("no Ray start commands: Ray's defaults start Ray on every node, as in Ray")
    if not starts:
        return data
    filled = {}
    for name, node_type in node_types.items():
        if isinstance(node_type, Mapping) and "ray_start" not in node_type:
            node_type = {**node_type, "ray_start": True}
        filled[name] = node_type
    data["available_node_types"] = filled
    return data


def docker_warnings(spec: Any) -> list[str]:
    """One line per ``docker`` key of Ray's that we do not act on."""
    sections = [("docker", spec.docker)] + [
        (f"available_node_types.{name}.docker", t.docker)
        for name, t in spec.available_node_types.items()
    ]
    return [
        f"{path}.{key}: Ray key not acted on"
        for path, docker in sections
        if docker is not None
        for key, value in sorted((docker.model_extra or {}).items())
        if value not in (None, False, "", [], {})
    ]
