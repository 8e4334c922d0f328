"""The catalogue record and the catalogue: one immutable `Product` per listing, shared by every
episode, search index and reward computation."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from shared.runtime.shopsim.reward import RewardProduct
from shared.runtime.shopsim.reward.text import render_option_value

# One option value as the source lists it: (value, price or None).
OptionEntry = tuple[str, float | None]


@dataclass(frozen=True, slots=True)
class Product:
    """A listing. `options` keep the source axis labels and values in order; the site shows
    and the agent selects their rendered form (`rendered_options`)."""

    asin: str
    title: str
    brand: str
    category: str
    attributes: tuple[str, ...]
    bullets: tuple[str, ...]
    description: str
    options: tuple[tuple[str, tuple[OptionEntry, ...]], ...]
    pricing: tuple[float, ...]
    # The source's `sub_title`: searched (as the reference's bullets field) when there are no
    # bullets, never read by the reward.
    sub_title: tuple[str, ...] = ()

    @property
    def search_bullets(self) -> tuple[str, ...]:
        """The bullets field of the search document, as the reference builds it."""
        return self.bullets or self.sub_title

    def rendered_options(self) -> dict[str, list[str]]:
        """Axis -> the values as shown and clicked (lower-case, `/` as ` | `)."""
        return {
            axis: [render_option_value(value) for value, _ in entries]
            for axis, entries in self.options
        }

    def raw_options(self) -> dict[str, list[dict[str, Any]]]:
        """The source `customization_options` layout: axis -> [{value, price}]."""
        return {
            axis: [{"value": value, "price": price} for value, price in entries]
            for axis, entries in self.options
        }

    def reward_view(self) -> RewardProduct:
        return RewardProduct(
            asin=self.asin,
            title=self.title,
            category=self.category,
            attributes=self.attributes,
            bullets=self.bullets,
            description=self.description,
            options=self.raw_options(),
            pricing=self.pricing,
        )

    def listing_price_text(self) -> str:
        """The listing price as the results page shows it: one price or a range."""
        if not self.pricing:
            return "n/a"
        if len(self.pricing) == 1 or self.pricing[0] == self.pricing[1]:
            return format_price(self.pricing[0])
        return f"{format_price(self.pricing[0])} to {format_price(self.pricing[1])}"


def format_price(value: float) -> str:
    return f"${value:,.2f}"


class Catalog:
    """Products in a fixed order (the index's tie-break order) with lookup by id."""

    def __init__(self, products: Iterable[Product], *, language: str = "en") -> None:
        self.products: list[Product] = list(products)
        self.language = language
        self._index: dict[str, int] = {}
        for position, product in enumerate(self.products):
            if product.asin in self._index:
                raise ValueError(f"duplicate product id {product.asin!r}")
            self._index[product.asin] = position

    def __len__(self) -> int:
        return len(self.products)

    def __iter__(self) -> Iterator[Product]:
        return iter(self.products)

    def __contains__(self, asin: object) -> bool:
        return asin in self._index

    def get(self, asin: str) -> Product | None:
        position = self._index.get(asin)
        return None if position is None else self.products[position]

    def position(self, asin: str) -> int:
        return self._index[asin]

    def __getitem__(self, asin: str) -> Product:
        return self.products[self._index[asin]]
