"""A world: one catalogue, one search index and the tasks with their splits, shared by every
episode of every environment built on it. Its version string changes with any of them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from shared.runtime.shopsim.product import Catalog
from shared.runtime.shopsim.search import SEARCH_VERSION, SearchIndex, build_index
from shared.runtime.shopsim.site import OBSERVATION_VERSION, SiteConfig
from shared.runtime.shopsim.task import SPLITS, Task

ENV_VERSION = "shopsim-v2"  # v2: reference pages and tokenizer (docs/shopsim.md)


def canonical_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def task_record(task: Task) -> dict[str, Any]:
    """A task as plain JSON (what split files hash and `env build` writes)."""
    return asdict(task)


def catalog_digest(catalog: Catalog) -> str:
    digest = hashlib.sha256()
    for product in catalog.products:
        digest.update(repr(product).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def split_digests(tasks: Iterable[Task]) -> dict[str, str]:
    """sha256 of each split's task records, in task order."""
    records: dict[str, list[dict[str, Any]]] = {}
    for task in tasks:
        records.setdefault(task.split, []).append(task_record(task))
    return {
        split: hashlib.sha256(canonical_json(items).encode("utf-8")).hexdigest()
        for split, items in sorted(records.items())
    }


@dataclass
class World:
    catalog: Catalog
    tasks: dict[str, Task]
    site: SiteConfig = field(default_factory=SiteConfig)
    engine: str = "bm25"
    name: str = "custom"
    index: SearchIndex | None = None
    _version: str | None = None
    _splits: dict[str, list[str]] | None = None

    def __post_init__(self) -> None:
        missing = sorted({t.gold_asin for t in self.tasks.values()} - set(self._gold_ids()))
        if missing:
            raise ValueError(f"gold products not in the catalogue: {missing[:5]}")
        if self.index is None:
            self.index = build_index(self.catalog, self.engine)

    def _gold_ids(self) -> Iterable[str]:
        return (task.gold_asin for task in self.tasks.values() if task.gold_asin in self.catalog)

    def task_ids(self, split: str) -> list[str]:
        if self._splits is None:
            self._splits = {name: [] for name in SPLITS}
            for task in self.tasks.values():
                self._splits.setdefault(task.split, []).append(task.task_id)
        if split not in self._splits:
            raise KeyError(f"unknown split {split!r}; known: {sorted(self._splits)}")
        return list(self._splits[split])

    def manifest(self, site: SiteConfig | None = None) -> dict[str, Any]:
        """What the version string fingerprints: data, splits, search and page settings."""
        return {
            "env_version": ENV_VERSION,
            "name": self.name,
            "catalog_sha256": catalog_digest(self.catalog),
            "products": len(self.catalog),
            "split_sha256": split_digests(self.tasks.values()),
            "split_sizes": {split: len(self.task_ids(split)) for split in SPLITS},
            "search": {"version": SEARCH_VERSION, "engine": self.engine},
            "observation_version": OBSERVATION_VERSION,
            "site": asdict(site or self.site),
        }

    def version_for(self, site: SiteConfig) -> str:
        """`shopsim-v2:<name>:<site style>:<12 hex>`: equal strings mean identical
        environments. The style is spelled out so every trajectory's provenance (which
        records this string) says which pages the policy saw."""
        digest = hashlib.sha256(canonical_json(self.manifest(site)).encode()).hexdigest()
        return f"{ENV_VERSION}:{self.name}:{site.style}:{digest[:12]}"

    @property
    def version(self) -> str:
        if self._version is None:
            self._version = self.version_for(self.site)
        return self._version
