"""R_price (spec 5): SKU price resolution from the selected options, and the budget check."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from shared.runtime.shopsim.reward.text import normalize_option_text

PASS = "pass"
UNVERIFIABLE = "unverifiable"


@dataclass(frozen=True)
class PriceResolution:
    status: str  # "pass" or "unverifiable"
    price: float | None
    method: str
    price_axis: str | None = None
    price_affecting_axes: tuple[str, ...] = field(default=())

    @property
    def verifiable(self) -> bool:
        return self.status == PASS

    def as_dict(self) -> dict[str, object]:
        return {
            "status": self.status,
            "price": self.price,
            "method": self.method,
            "price_axis": self.price_axis,
            "price_affecting_axes": list(self.price_affecting_axes),
        }


def valid_price(value: object) -> float | None:
    """A finite, non-negative float, or None."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number >= 0 else None


def _axis_price_index(entries: object) -> dict[str, float | None]:
    """norm(value) -> price for the mapping entries of one axis; later duplicates win."""
    index: dict[str, float | None] = {}
    if not isinstance(entries, list | tuple):
        return index
    for entry in entries:
        if not isinstance(entry, Mapping):
            continue
        key = normalize_option_text(entry.get("value"))
        if key:
            index[key] = valid_price(entry.get("price"))
    return index


def resolve_sku_price(
    options: Mapping[str, object] | None,
    pricing: Sequence[object] | None,
    selected_options: object,
) -> PriceResolution:
    """Spec 5.3: rows 0-5, in order. `options` are the raw axis -> [{value, price}] entries."""
    if not isinstance(selected_options, Mapping):
        return PriceResolution(UNVERIFIABLE, None, "invalid_selected_options")
    axes = {str(axis): _axis_price_index(entries) for axis, entries in (options or {}).items()}
    affecting = tuple(
        axis
        for axis, index in axes.items()
        if len({price for price in index.values() if price is not None}) > 1
    )
    if len(affecting) >= 2:
        return PriceResolution(
            UNVERIFIABLE, None, "multiple_price_affecting_axes", price_affecting_axes=affecting
        )
    if len(affecting) == 1:
        axis = affecting[0]
        if axis not in selected_options:
            return PriceResolution(UNVERIFIABLE, None, "price_axis_unselected", axis, affecting)
        price = axes[axis].get(normalize_option_text(selected_options[axis]))
        if price is None:
            return PriceResolution(
                UNVERIFIABLE, None, "selected_variant_price_missing", axis, affecting
            )
        return PriceResolution(PASS, price, "selected_price_axis", axis, affecting)
    option_prices = {
        price for index in axes.values() for price in index.values() if price is not None
    }
    if len(option_prices) == 1:
        return PriceResolution(PASS, next(iter(option_prices)), "constant_option_price")
    if not axes:
        listing = {price for price in map(valid_price, pricing or ()) if price is not None}
        if len(listing) == 1:
            return PriceResolution(PASS, next(iter(listing)), "single_listing_price")
    return PriceResolution(UNVERIFIABLE, None, "price_not_deterministic")


def explicit_price_resolution(price: object) -> PriceResolution:
    """Spec 5.2 path 2: a caller-supplied price (the live env never uses it)."""
    number = valid_price(price)
    if number is None:
        return PriceResolution(UNVERIFIABLE, None, "explicit_price")
    return PriceResolution(PASS, number, "explicit_price")


def price_reward(resolution: PriceResolution, price_upper: float | None) -> float:
    """1.0 without a ceiling; else only a verifiable price at or under it."""
    if price_upper is None:
        return 1.0
    if resolution.status != PASS or resolution.price is None:
        return 0.0
    return float(float(resolution.price) <= float(price_upper))
