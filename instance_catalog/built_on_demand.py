"""Catalog entries built when first looked up: a cluster config names a few of a cloud's
hundreds of types, and building one means its prices, zones and accelerator."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping

from instance_catalog.model import InstanceType


class BuiltOnDemand(Mapping[str, InstanceType]):
    """Name -> type over a known set of names, each type built (once) when first looked up."""

    def __init__(self, names: Iterable[str], build: Callable[[str], InstanceType]) -> None:
        self._names = dict.fromkeys(names)
        self._build = build
        self._built: dict[str, InstanceType] = {}

    def __getitem__(self, name: str) -> InstanceType:
        if name not in self._built:
            if name not in self._names:
                raise KeyError(name)
            self._built[name] = self._build(name)
        return self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)
