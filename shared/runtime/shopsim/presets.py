"""Named world presets: `paper` (the reference's 3,726 / 400 / 400 split sizes), `cpu` (small,
compact pages for a CPU demo model) and `test` (tiny, for unit tests). Worlds are cached per
process, so every environment built from a preset shares one catalogue and index.

Every preset uses the reference page style. `paper` also uses the reference's results page (20
per page with brand, category and up to 10 key attributes). `cpu` and `test` deliberately
shrink that page (5 / 10 results, id, title and price only): SmolLM2-135M's 8k context holds a
whole episode only with compact pages, and CPU decoding cost grows with every prompt token.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from shared.runtime.shopsim.catalog import generate_catalog
from shared.runtime.shopsim.site import SiteConfig
from shared.runtime.shopsim.tasks import TaskSettings, generate_tasks
from shared.runtime.shopsim.world import World

DEFAULT_SEED = 20260830


@dataclass(frozen=True)
class Preset:
    products: int
    counts: dict[str, int]
    persona_detail: str = "full"
    site: SiteConfig = field(default_factory=SiteConfig)
    family_size: tuple[int, int] = (4, 10)
    golds_per_family: int = 2
    engine: str = "bm25"


PRESETS: dict[str, Preset] = {
    "paper": Preset(30_000, {"train": 3726, "val": 400, "test": 400}),
    "cpu": Preset(
        5_000,
        {"train": 400, "val": 100, "test": 100},
        persona_detail="compact",
        site=SiteConfig(results_per_page=5, result_details=False),  # compact: see above
    ),
    "test": Preset(
        1_000,
        {"train": 60, "val": 20, "test": 20},
        persona_detail="compact",
        site=SiteConfig(results_per_page=10, result_details=False),
    ),
}


def build_world(
    preset: str | Preset,
    seed: int = DEFAULT_SEED,
    *,
    products: int | None = None,
    name: str | None = None,
) -> World:
    """Generate a world from a preset (or a `Preset` value), optionally resizing the catalogue."""
    spec = PRESETS[preset] if isinstance(preset, str) else preset
    if isinstance(preset, str) and preset not in PRESETS:
        raise KeyError(f"unknown preset {preset!r}; known: {sorted(PRESETS)}")
    generated = generate_catalog(products or spec.products, seed, family_size=spec.family_size)
    settings = TaskSettings(
        counts=dict(spec.counts),
        persona_detail=spec.persona_detail,
        golds_per_family=spec.golds_per_family,
    )
    tasks = generate_tasks(generated, settings, seed)
    label = name or (f"{preset}-{seed}" if isinstance(preset, str) else f"custom-{seed}")
    if products:
        label += f"-{products}"
    return World(
        catalog=generated.catalog,
        tasks={task.task_id: task for task in tasks},
        site=spec.site,
        engine=spec.engine,
        name=label,
    )


@functools.lru_cache(maxsize=4)
def load_world(name: str, seed: int | None = None) -> World:
    """The cached world of a preset (built on first use)."""
    if name not in PRESETS:
        raise KeyError(f"unknown preset {name!r}; known: {sorted(PRESETS)}")
    return build_world(name, DEFAULT_SEED if seed is None else seed)
