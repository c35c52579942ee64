"""Look-ups over every catalogued instance type: by name, by accelerator, sorted by price."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import cache

from accel.names import lookup, tokens_for
from accel.user_input import MATCH_LIMIT, brief
from instance_catalog.built_on_demand import BuiltOnDemand
from instance_catalog.model import AWS, CLOUDS, GCP, Accelerator, InstanceType
from instance_catalog.resources import resources_for


class UnknownInstanceTypeError(LookupError):
    """No such instance type; carries the closest names."""

    def __init__(self, name: str, cloud: str | None, suggestions: list[str]) -> None:
        self.name = name
        self.suggestions = suggestions
        where = f" on {cloud}" if cloud else ""
        hint = f"; closest: {', '.join(suggestions)}" if suggestions else ""
        super().__init__(f"unknown instance type {brief(name)}{where}{hint}")


@dataclass(frozen=True)
class AcceleratorQuery:
    """``NAME[:COUNT]`` as users type it, e.g. ``a100-80gb:8``."""

    name: str
    """Canonical type name."""
    count: float | None = None

    @classmethod
    def parse(cls, text: str) -> AcceleratorQuery:
        """Raises ``UnknownAcceleratorTypeError`` (closest names) or ``ValueError``."""
        prefix = "accelerator_type:"
        bare = text[len(prefix) :] if text.lower().startswith(prefix) else text
        name, _, count = bare.partition(":")
        try:
            parsed_count = float(count) if count else None
        except ValueError:
            raise ValueError(f"accelerator count in {brief(text)} must be a number") from None
        return cls(lookup(name).name, parsed_count)


@dataclass(frozen=True)
class Offer:
    """An instance type as a user would launch it: with GPUs attached where that applies."""

    instance_type: InstanceType
    attached: Accelerator | None = None

    @property
    def accelerator(self) -> Accelerator | None:
        return self.attached or self.instance_type.accelerator

    @property
    def unavailable(self) -> str | None:
        """Why it cannot be launched, if it cannot (``InstanceType.unavailable``)."""
        if self.attached is not None:
            for attachment in self.instance_type.attachable_gpus:
                if attachment.accelerator.cloud_name == self.attached.cloud_name:
                    return attachment.unavailable
        return self.instance_type.unavailable

    @property
    def label(self) -> str:
        if self.attached is None:
            return self.instance_type.name
        return f"{self.instance_type.name} + {self.attached.count:g}x {self.attached.cloud_name}"

    def resources(self) -> dict[str, float]:
        return resources_for(self.instance_type, attached=self.attached)

    def price(self, region: str | None = None, spot: bool = False) -> float | None:
        host = self.instance_type.price(region, spot)
        if self.attached is None or host is None:
            return host
        from instance_catalog.gcp import attached_gpu_price

        gpus = attached_gpu_price(
            self.attached.cloud_name, int(self.attached.count), region, spot=spot
        )
        return None if gpus is None else host + gpus

    def matches(self, query: AcceleratorQuery) -> bool:
        accelerator = self.accelerator
        if accelerator is None or query.name not in tokens_for(accelerator.name):
            return False
        return query.count is None or accelerator.count == query.count


class Catalog:
    """Every catalogued type of every cloud; a cloud's types load when first asked for."""

    def __init__(self, loaders: Mapping[str, Callable[[], Mapping[str, InstanceType]]]) -> None:
        """``loaders``: cloud -> a function giving its types by name."""
        self._loaders = dict(loaders)
        self._loaded: dict[str, Mapping[str, InstanceType]] = {}

    def _of(self, cloud: str) -> Mapping[str, InstanceType]:
        """Name -> type on ``cloud`` (loaded on first use; empty for an unknown cloud)."""
        if cloud not in self._loaded:
            loader = self._loaders.get(cloud)
            self._loaded[cloud] = loader() if loader else {}
        return self._loaded[cloud]

    def entries(self, cloud: str | None = None) -> list[InstanceType]:
        return [e for c in ((cloud,) if cloud else CLOUDS) for e in self._of(c).values()]

    def get(self, name: str, cloud: str | None = None) -> InstanceType:
        """The type called ``name`` (on ``cloud``, or whichever cloud has it)."""
        for candidate_cloud in (cloud,) if cloud else CLOUDS:
            entry = self._of(candidate_cloud).get(_normalise(candidate_cloud, name))
            if entry is not None:
                return entry
        if cloud in (None, GCP):
            from instance_catalog.gcp import custom_machine_type

            custom = custom_machine_type(name)
            if custom is not None:
                return custom
        names = [e.name for e in self.entries(cloud)]
        close = []
        if len(name) <= MATCH_LIMIT:
            close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
        raise UnknownInstanceTypeError(name, cloud, close)

    def offers(
        self,
        cloud: str | None = None,
        accelerator: AcceleratorQuery | None = None,
        region: str | None = None,
        include_unavailable: bool = False,
    ) -> list[Offer]:
        """Launchable offers, cheapest first (unknown prices last, then by name). One that
        cannot be launched is included only when ``accelerator`` names its accelerator (or
        ``include_unavailable``)."""
        offers = [
            offer
            for entry in self.entries(cloud)
            if region is None or region in entry.regions
            for offer in _offers_of(entry)
            if (accelerator is None or offer.matches(accelerator))
            and (include_unavailable or offer.unavailable is None or _names(accelerator, offer))
        ]

        def order(offer: Offer) -> tuple[bool, float, str]:
            price = offer.price(region)
            return (price is None, price or 0.0, offer.label)

        return sorted(offers, key=order)


def _names(query: AcceleratorQuery | None, offer: Offer) -> bool:
    """Whether ``query`` names the offer's own accelerator (not a generic parent of it)."""
    return (
        query is not None
        and offer.accelerator is not None
        and (query.name == offer.accelerator.name)
    )


def _offers_of(entry: InstanceType) -> list[Offer]:
    offers = [Offer(entry)]
    for attachment in entry.attachable_gpus:
        offers.extend(
            Offer(entry, replace(attachment.accelerator, count=count))
            for count in attachment.counts
        )
    return offers


def _normalise(cloud: str, name: str) -> str:
    """GCP TPU types have several spellings (``v5e-8``, ``tpu7x-16``)."""
    if cloud == "gcp":
        from accel.tpu_generations import parse_pod_type

        pod = parse_pod_type(name)
        if pod is not None:
            return pod.name
    return name


@cache
def load_catalog() -> Catalog:
    """The bundled catalog (or the user's refreshed EC2 snapshot), each cloud's part loaded
    once, when first used."""
    return Catalog({AWS: _aws_types, GCP: _gcp_types})


def _aws_types() -> Mapping[str, InstanceType]:
    from instance_catalog.aws import aws_instance_type, aws_type_names

    return BuiltOnDemand(aws_type_names(), aws_instance_type)


def _gcp_types() -> Mapping[str, InstanceType]:
    from instance_catalog.gcp import gcp_types_by_name

    return gcp_types_by_name()
