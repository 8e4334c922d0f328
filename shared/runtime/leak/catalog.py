"""What the gold firewall knows of the catalog: how many titles hold each word, which id
fragments other products share, and the category language every listing uses.

Distinctiveness is measured here, not guessed: a title word is *common* (category language,
never a leak alone) when at least COMMON_TITLE_SHARE of the catalog's titles hold it, and at
least two; an id fragment is *distinctive* when no other product id holds it. Built once per
catalog: 30,000 products index in seconds (`ids_by_run` keeps 4-character runs, not every
fragment). The analyst builds
the index from the world's catalog (`CatalogIndex.of_products`); the firewall contract gives it
as the gold's optional `catalog`, and without one the gold's own titles and ids are the catalog
seen (the titles an agent read), beside the ShopSim vocabulary's category names.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

# A word in this share of the catalog's titles (and in two at least) is category language.
COMMON_TITLE_SHARE = 0.01
MIN_ID_FRAGMENT = 4  # characters of an id (issue: "any run of >= 4 characters")


def _fold(text: str) -> str:
    from shared.runtime.leak import normalize  # one normalization for the firewall and its catalog

    return normalize(text)


def title_words(title: str) -> set[str]:
    return set(re.findall(r"[^\W_]+", _fold(title)))


def _folded_id(product_id: str) -> str:
    return re.sub(r"[\W_]", "", _fold(product_id))


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: one index per catalog
class CatalogIndex:
    title_count: int
    title_frequency: Mapping[str, int]  # word -> titles holding it
    # each run of MIN_ID_FRAGMENT characters -> the ids holding it: a longer fragment's holders
    # are among its first run's, so one lookup and a few substring tests answer for any length
    ids_by_run: Mapping[str, tuple[str, ...]]
    product_ids: frozenset[str]  # folded
    category_words: frozenset[str]  # words of the catalog's category names

    @classmethod
    def build(
        cls, titles: Iterable[str], product_ids: Iterable[str], categories: Iterable[str] = ()
    ) -> CatalogIndex:
        titles = list(dict.fromkeys(titles))
        ids = {_folded_id(pid) for pid in product_ids}
        title_frequency = Counter(word for title in titles for word in title_words(title))
        ids_by_run: dict[str, list[str]] = defaultdict(list)
        for pid in sorted(ids):
            for run in dict.fromkeys(_runs(pid)):
                ids_by_run[run].append(pid)
        category_words = {word for name in categories for word in title_words(name)}
        return cls(
            len(titles), title_frequency, {run: tuple(held) for run, held in ids_by_run.items()},
            frozenset(ids), frozenset(category_words | _vocabulary_words()),
        )  # fmt: skip

    @classmethod
    def of_products(cls, products: Iterable[Any]) -> CatalogIndex:
        """From catalog products (`title`, `asin`, `category` attributes: ShopSim's Product)."""
        products = list(products)
        return cls.build(
            (p.title for p in products),
            (p.asin for p in products),
            {p.category for p in products},
        )

    @classmethod
    def from_json(cls, data: Any) -> CatalogIndex:
        """The contract's `catalog`: a list of {"product_id", "title", "category"} objects."""
        if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
            raise ValueError("gold.catalog must be a list of objects")
        return cls.build(
            (str(item["title"]) for item in data if item.get("title")),
            (str(item["product_id"]) for item in data if item.get("product_id")),
            (str(item["category"]) for item in data if item.get("category")),
        )

    def is_common(self, word: str) -> bool:
        """Category language: in COMMON_TITLE_SHARE of the titles and two at least, or a word
        of a category name."""
        least = max(2, math.ceil(COMMON_TITLE_SHARE * self.title_count))
        return word in self.category_words or self.title_frequency.get(word, 0) >= least

    def fragment_elsewhere(self, fragment: str, product_id: str) -> bool:
        """Whether an id other than `product_id` (folded) holds the fragment (MIN_ID_FRAGMENT
        characters or more)."""
        held_by = self.ids_by_run.get(fragment[:MIN_ID_FRAGMENT], ())
        return any(fragment in other for other in held_by if other != product_id)


def _runs(folded_id: str) -> list[str]:
    """The id's runs of exactly MIN_ID_FRAGMENT characters."""
    return [
        folded_id[start : start + MIN_ID_FRAGMENT]
        for start in range(len(folded_id) - MIN_ID_FRAGMENT + 1)
    ]


@lru_cache(maxsize=1)
def _vocabulary_words() -> frozenset[str]:
    """Words of the ShopSim vocabulary's department, group and category names and nouns."""
    from shared.runtime.shopsim.vocabulary import SUBCATEGORIES

    names = [
        name for sub in SUBCATEGORIES for name in (sub.department, sub.group, sub.name, sub.noun)
    ]
    return frozenset(word for name in names for word in title_words(name))
