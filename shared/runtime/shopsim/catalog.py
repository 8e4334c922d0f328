"""The deterministic catalogue generator: dense families of near-identical products per
sub-category, so that an agent must read and compare.

A family shares brand, product line and most attribute values; each member changes one or two
attribute dimensions, offers its own subset of option values and has its own price. At most one
option axis (the sub-category's price axis) varies the price, as the cleaned reference
catalogue guarantees. Everything follows from `seed`; the same arguments give the same catalogue.
"""

from __future__ import annotations

import math
import random
import string
from dataclasses import dataclass

from shared.runtime.shopsim.product import Catalog, OptionEntry, Product
from shared.runtime.shopsim.vocabulary import SUBCATEGORIES, AxisSpec, SubCategory

ID_ALPHABET = string.digits + string.ascii_uppercase
_SYLLABLES_A = ("ka", "lo", "ve", "zu", "mi", "ra", "no", "te", "qui", "sa", "do", "fi", "bre",
                "cor", "ly", "pax", "ori", "tam", "gle", "vin")  # fmt: skip
_SYLLABLES_B = ("lix", "tra", "vo", "mond", "rex", "sa", "lune", "dora", "nix", "ta", "vane",
                "ko", "zen", "tor", "bel", "ric", "via", "mo", "quin", "dyn")  # fmt: skip
_LINES = ("Aero", "Nova", "Pulse", "Terra", "Flux", "Orbit", "Zenith", "Echo", "Summit", "Vista",
          "Prime", "Core", "Drift", "Halo", "Apex", "Lumen", "Vertex", "Crest", "Ember", "Tide",
          "Atlas", "Nimbus", "Quartz", "Sierra", "Cobalt", "Juniper", "Maple", "Onyx", "Pioneer",
          "Radiant")  # fmt: skip
# Share of products sold without option axes (one listing price), and of "trap" listings whose
# options carry no prices (their SKU price is unverifiable, as some reference listings are).
NO_OPTION_SHARE = 0.08
UNPRICED_OPTION_SHARE = 0.03


@dataclass(frozen=True)
class Family:
    """Near-identical products: positions in the catalogue of one brand + line."""

    subcategory: int  # index into SUBCATEGORIES
    brand: str
    line: str
    members: tuple[int, ...]


@dataclass
class GeneratedCatalog:
    catalog: Catalog
    families: list[Family]
    family_of: list[int]  # catalogue position -> family index
    subcategories: tuple[SubCategory, ...] = SUBCATEGORIES


def nice_price(value: float) -> float:
    """A shelf price: whole dollars minus a cent (x.99), at least 0.99."""
    return max(0.99, math.floor(value) + 0.99)


def _brand_names(rng: random.Random, count: int, forbidden: list[str]) -> list[str]:
    names: list[str] = []
    seen: set[str] = set()
    while len(names) < count:
        name = (rng.choice(_SYLLABLES_A) + rng.choice(_SYLLABLES_B)).capitalize()
        folded = name.casefold()
        if folded in seen or any(word in folded for word in forbidden):
            continue
        seen.add(folded)
        names.append(name)
    return names


class _IdMaker:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.seen: set[str] = set()

    def asin(self) -> str:
        while True:
            candidate = "B0" + "".join(self.rng.choices(ID_ALPHABET, k=8))
            if candidate not in self.seen:
                self.seen.add(candidate)
                return candidate


def _offered(rng: random.Random, axis: AxisSpec, low: int) -> list[int]:
    """Indices of the values a family offers on an axis (a run for sizes, else a subset)."""
    count = len(axis.values)
    size = rng.randint(min(low, count), count)
    if axis.contiguous:
        start = rng.randint(0, count - size)
        return list(range(start, start + size))
    return sorted(rng.sample(range(count), size))


def _member_offer(rng: random.Random, axis: AxisSpec, family_offer: list[int]) -> list[int]:
    if len(family_offer) <= 2:
        return family_offer
    if axis.contiguous:
        drop_front = rng.random() < 0.3
        drop_back = rng.random() < 0.3
        start, stop = int(drop_front), len(family_offer) - int(drop_back)
        return family_offer[start:stop]
    keep = rng.randint(2, len(family_offer))
    return sorted(rng.sample(family_offer, keep))


def _price_axis(sub: SubCategory) -> int | None:
    for index, axis in enumerate(sub.axes):
        if axis.increments is not None:
            return index
    return None


def _product_options(
    rng: random.Random,
    sub: SubCategory,
    family_offers: list[list[int]],
    price: float,
    mode: str,
) -> tuple[tuple[tuple[str, tuple[OptionEntry, ...]], ...], tuple[float, ...]]:
    """The option axes and listing prices of one member, by pricing `mode`."""
    if mode == "none":
        return (), (price,)
    price_axis = _price_axis(sub)
    axes = []
    prices: list[float] = []
    for index, axis in enumerate(sub.axes):
        offer = _member_offer(rng, axis, family_offers[index])
        entries: list[OptionEntry] = []
        for value_index in offer:
            value = axis.values[value_index]
            if mode == "unpriced":
                entries.append((value, None))
            elif index == price_axis and axis.increments is not None:
                value_price = round(price + axis.increments[value_index], 2)
                entries.append((value, value_price))
                prices.append(value_price)
            else:
                entries.append((value, price))
                prices.append(price)
        axes.append((axis.name, tuple(entries)))
    if mode == "unpriced":
        return tuple(axes), (price, nice_price(price * 1.25))
    low, high = min(prices), max(prices)
    return tuple(axes), ((low,) if low == high else (low, high))


def generate_catalog(
    size: int,
    seed: int = 0,
    *,
    family_size: tuple[int, int] = (4, 10),
    subcategories: tuple[SubCategory, ...] = SUBCATEGORIES,
) -> GeneratedCatalog:
    """`size` products spread over the sub-categories in families of `family_size` members."""
    if size < len(subcategories):
        raise ValueError(f"a catalogue needs at least {len(subcategories)} products")
    low_family, high_family = family_size
    if not 1 <= low_family <= high_family:
        raise ValueError("family_size must be (low, high) with 1 <= low <= high")
    rng = random.Random(f"shopsim-catalog:{seed}")
    ids = _IdMaker(random.Random(f"shopsim-ids:{seed}"))
    all_values = sorted({value for sub in subcategories for value in sub.values()}, key=len)
    forbidden = [value for value in all_values if len(value) >= 3]
    departments = sorted({sub.department for sub in subcategories})
    brands_per_department = max(6, min(40, size // (len(subcategories) * 20)))
    brands = {
        department: _brand_names(
            random.Random(f"shopsim-brands:{seed}:{department}"), brands_per_department, forbidden
        )
        for department in departments
    }
    products: list[Product] = []
    families: list[Family] = []
    family_of: list[int] = []
    base, extra = divmod(size, len(subcategories))
    for sub_index, sub in enumerate(subcategories):
        quota = base + (1 if sub_index < extra else 0)
        models_seen: set[str] = set()
        low_price, high_price = sub.price_range
        while quota > 0:
            members_wanted = min(quota, rng.randint(low_family, high_family))
            brand = rng.choice(brands[sub.department])
            line = rng.choice(_LINES)
            profile = [rng.randrange(len(values)) for _, values in sub.dims]
            family_offers = [_offered(rng, axis, 2) for axis in sub.axes]
            family_price = math.exp(rng.uniform(math.log(low_price), math.log(high_price)))
            profiles_seen: set[tuple[int, ...]] = set()
            positions: list[int] = []
            attempts = 0
            while len(positions) < members_wanted and attempts < members_wanted * 20:
                attempts += 1
                member = list(profile)
                if positions:  # the first member keeps the family profile
                    for dim in rng.sample(range(len(sub.dims)), rng.choice((1, 1, 2))):
                        choices = [i for i in range(len(sub.dims[dim][1])) if i != member[dim]]
                        member[dim] = rng.choice(choices)
                key = tuple(member)
                if key in profiles_seen:
                    continue
                profiles_seen.add(key)
                model = ""
                while not model or model in models_seen:
                    model = "".join(rng.choices(string.ascii_uppercase, k=2)) + str(
                        rng.randint(100, 999)
                    )
                models_seen.add(model)
                values = [sub.dims[dim][1][member[dim]] for dim in range(len(sub.dims))]
                roll = rng.random()
                mode = (
                    "none"
                    if roll < NO_OPTION_SHARE
                    else "unpriced"
                    if roll < NO_OPTION_SHARE + UNPRICED_OPTION_SHARE
                    else "priced"
                )
                price = nice_price(family_price * rng.uniform(0.8, 1.25))
                options, pricing = _product_options(rng, sub, family_offers, price, mode)
                title = f"{brand} {line} {model} {sub.noun}, {values[0]}, {values[1]}"
                positions.append(len(products))
                family_of.append(len(families))
                products.append(
                    Product(
                        asin=ids.asin(),
                        title=title,
                        brand=brand,
                        category=sub.path,
                        attributes=tuple(values),
                        # as in the reference's frozen data: no bullets, the description
                        # repeats the title (search and the attribute reward's text see this)
                        bullets=(),
                        description=title,
                        options=options,
                        pricing=pricing,
                    )
                )
            quota -= len(positions)
            families.append(Family(sub_index, brand, line, tuple(positions)))
    return GeneratedCatalog(Catalog(products), families, family_of, subcategories)
