"""Reading and writing the public ShopSimulator product-and-task JSON layout.

`products.json` is a JSON array of product records: `asin`, `title` (or `Title`), `shop_name`
(the brand shown and searched; the reference drops any `brand` key while loading, so `brand` is
read only when `shop_name` is absent), `category`, `attribute` (or `Attributes`/`attributes`),
bullets in `small_description` (or `BulletPoints`), `sub_title` (searched in place of empty
bullets, as the reference's search document does; never scored), `full_description` (or
`Description`), `pricing`
and `customization_options` ({axis: [{value, price}]}), and `instructions`: a list of
{`instruction`, `instruction_simple`, `attributes`, `instruction_options`, `price_upper`,
`user_persona`, `task_id`}. A record's own `user_persona` applies to its instructions unless one
carries its own. Optional `splits.json` names each split's task ids; `manifest.json` (written by
`intraskill env build`) carries the page settings and name.

Loader facts kept from the reference: missing `pricing` becomes [100.0], only the first two
listing prices are kept, instructions without attributes are skipped, and a missing
`price_upper` is parsed from the instruction text (spec section 8). Bad records raise
`LoaderError` naming the record and the field.
"""

from __future__ import annotations

import json
import math
import re
import zlib
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from shared.runtime.shopsim.product import Catalog, Product
from shared.runtime.shopsim.reward.budget import BudgetError, goal_price_upper
from shared.runtime.shopsim.reward.price import valid_price
from shared.runtime.shopsim.site import SiteConfig
from shared.runtime.shopsim.task import SPLITS, Task
from shared.runtime.shopsim.world import World, split_digests

PRODUCTS_FILE = "products.json"
SPLITS_FILE = "splits.json"
MANIFEST_FILE = "manifest.json"
SPLITS_SCHEMA = "shopsim-splits-v1"
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


class LoaderError(ValueError):
    """A record of the data set that cannot be loaded; the message names record and field."""


def _where(index: int, record: Mapping[str, Any] | None = None) -> str:
    asin = record.get("asin") if isinstance(record, Mapping) else None
    return f"product record {index}" + (f" (asin {asin!r})" if asin else "")


def _first(record: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        if record.get(name) not in (None, ""):
            return record[name]
    return None


def _text(value: Any, where: str, field: str, *, required: bool = False) -> str:
    if value is None:
        if required:
            raise LoaderError(f"{where}: field {field!r} is required")
        return ""
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise LoaderError(f"{where}: field {field!r} must be a string, not {type(value).__name__}")
    return str(value)


def _text_list(value: Any, where: str, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value else ()
    if not isinstance(value, list) or not all(isinstance(v, str | int | float) for v in value):
        raise LoaderError(f"{where}: field {field!r} must be a list of strings")
    return tuple(str(v) for v in value)


def _pricing(value: Any, where: str) -> tuple[float, ...]:
    if value in (None, "", []):
        return (100.0,)  # the reference loader's default
    items = value if isinstance(value, list) else [value]
    prices = []
    for item in items[:2]:  # the reference keeps the first two listing prices
        try:
            number = float(item)
        except (TypeError, ValueError):
            raise LoaderError(f"{where}: field 'pricing' holds a non-number {item!r}") from None
        if not math.isfinite(number):
            raise LoaderError(f"{where}: field 'pricing' holds a non-finite {item!r}")
        prices.append(number)
    return tuple(prices)


def _options(
    value: Any, where: str
) -> tuple[tuple[str, tuple[tuple[str, float | None], ...]], ...]:
    if value in (None, "", {}):
        return ()
    if not isinstance(value, Mapping):
        raise LoaderError(
            f"{where}: field 'customization_options' must map each axis to a list of "
            "{value, price} objects"
        )
    axes = []
    for axis, entries in value.items():
        if entries is None:
            continue  # the reference skips null axes
        if not isinstance(entries, list):
            raise LoaderError(f"{where}: customization_options[{axis!r}] must be a list")
        parsed = []
        for position, entry in enumerate(entries):
            if not isinstance(entry, Mapping) or not isinstance(entry.get("value"), str | int):
                raise LoaderError(
                    f"{where}: customization_options[{axis!r}][{position}] needs a 'value'"
                )
            raw_price = entry.get("price")
            price = valid_price(raw_price) if raw_price is not None else None
            parsed.append((str(entry["value"]), price))
        axes.append((str(axis), tuple(parsed)))
    return tuple(axes)


def product_from_record(record: Any, index: int) -> Product:
    where = _where(index, record)
    if not isinstance(record, Mapping):
        raise LoaderError(f"{where}: must be a JSON object")
    asin = _text(record.get("asin"), where, "asin", required=True).strip()
    if not asin or asin == "nan" or len(asin) > 20:
        raise LoaderError(f"{where}: field 'asin' must be a non-empty id of at most 20 characters")
    return Product(
        asin=asin,
        title=_text(_first(record, "title", "Title"), where, "title", required=True),
        brand=_text(_first(record, "shop_name", "brand"), where, "shop_name"),
        category=_text(_first(record, "category", "product_category"), where, "category"),
        attributes=_text_list(
            _first(record, "attribute", "Attributes", "attributes"), where, "attribute"
        ),
        bullets=_text_list(
            _first(record, "small_description", "BulletPoints", "bullets"), where, "bullets"
        ),
        description=_text(
            _first(record, "full_description", "Description", "description"), where, "description"
        ),
        options=_options(_first(record, "customization_options", "options"), where),
        pricing=_pricing(_first(record, "pricing", "price"), where),
        sub_title=_text_list(record.get("sub_title"), where, "sub_title"),
    )


def _task_id(raw: Any, fallback: int) -> str:
    if raw is None:
        return f"task-{fallback:06d}"
    if isinstance(raw, int) or (isinstance(raw, str) and raw.isdigit()):
        return f"task-{int(raw):06d}"
    return str(raw)


def _tasks_from_record(
    record: Mapping[str, Any], product: Product, index: int, counter: list[int]
) -> list[Task]:
    where = _where(index, record)
    instructions = record.get("instructions")
    if instructions in (None, []):
        return []
    if not isinstance(instructions, list):
        raise LoaderError(f"{where}: field 'instructions' must be a list")
    record_persona = (
        record.get("user_persona") if isinstance(record.get("user_persona"), dict) else {}
    )
    tasks = []
    for position, raw in enumerate(instructions):
        here = f"{where} instructions[{position}]"
        if not isinstance(raw, Mapping):
            raise LoaderError(f"{here}: must be a JSON object")
        attributes = _text_list(raw.get("attributes"), here, "attributes")
        counter[0] += 1
        if not attributes:
            continue  # the reference builds no goal without attributes
        complete = _text(raw.get("instruction"), here, "instruction", required=True)
        simple = _text(raw.get("instruction_simple"), here, "instruction_simple") or complete
        try:
            price_upper = goal_price_upper(
                complete, raw.get("instruction_simple"), raw.get("price_upper")
            )
        except BudgetError as error:
            raise LoaderError(f"{here}: field 'price_upper': {error}") from None
        options = raw.get("instruction_options")
        if isinstance(options, Mapping):
            options = list(options)  # get_goals keeps a mapping's keys (spec 11.6)
        option_values = tuple(str(v) for v in (options or []))
        persona = (
            raw.get("user_persona") if isinstance(raw.get("user_persona"), dict) else record_persona
        )
        persona = {k: v for k, v in (persona or {}).items() if k != "__reasoning__"}
        gold_options = raw.get("gold_options") if isinstance(raw.get("gold_options"), dict) else {}
        tasks.append(
            Task(
                task_id=_task_id(raw.get("task_id"), counter[0] - 1),
                split=str(raw.get("split") or ""),
                instruction=complete,
                instruction_simple=simple,
                attributes=attributes,
                instruction_options=option_values,
                price_upper=price_upper,
                persona=persona,
                gold_asin=product.asin,
                gold_title=product.title,
                gold_category=product.category,
                gold_options={str(k): str(v) for k, v in gold_options.items()},
                option_axes=tuple(raw.get("option_axes") or ()),
                budget_amount=raw.get("budget_amount"),
                budget_approximate=bool(raw.get("budget_approximate", False)),
                persona_id=str(raw.get("persona_id") or ""),
                persona_only=tuple(raw.get("persona_only") or ()),
                difficulty=str(raw.get("difficulty") or "unknown"),
            )
        )
    return tasks


def _split_map(path: Path) -> dict[str, str]:
    """task id -> split from a splits file (ours, or the reference's `splits.*.task_ids`)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    splits = data.get("splits") if isinstance(data, Mapping) else None
    if not isinstance(splits, Mapping):
        raise LoaderError(f"{path}: field 'splits' must map split names to task ids")
    mapping: dict[str, str] = {}
    for split, entry in splits.items():
        ids = entry.get("task_ids") if isinstance(entry, Mapping) else entry
        if not isinstance(ids, list):
            raise LoaderError(f"{path}: splits[{split!r}] needs a 'task_ids' list")
        for raw in ids:
            task_id = _task_id(raw, 0)
            if task_id in mapping:
                raise LoaderError(f"{path}: task {task_id} is in two splits")
            mapping[task_id] = split
    return mapping


def _hashed_split(task: Task) -> str:
    """Without a splits file: group by gold product, ~82/9/9 by a stable hash."""
    bucket = zlib.crc32(task.gold_asin.encode()) % 100
    return "test" if bucket < 9 else "val" if bucket < 18 else "train"


def load_world_dir(path: str | Path, *, engine: str = "bm25") -> World:
    folder = Path(path)
    products_path = folder / PRODUCTS_FILE if folder.is_dir() else folder
    if not products_path.exists():
        raise LoaderError(f"{products_path} not found")
    try:
        records = json.loads(products_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise LoaderError(f"{products_path}: not valid JSON ({error})") from None
    if not isinstance(records, list):
        raise LoaderError(f"{products_path}: must hold a JSON array of product records")
    products: list[Product] = []
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    counter = [0]
    for index, record in enumerate(records):
        product = product_from_record(record, index)
        if product.asin in seen:
            raise LoaderError(
                f"{_where(index, record)}: field 'asin' repeats record {seen[product.asin]}"
            )
        seen[product.asin] = index
        products.append(product)
        tasks += _tasks_from_record(record, product, index, counter)
    base = folder if folder.is_dir() else folder.parent
    split_of = _split_map(base / SPLITS_FILE) if (base / SPLITS_FILE).exists() else {}
    placed = []
    for task in tasks:
        split = split_of.get(task.task_id) or task.split or _hashed_split(task)
        if split_of and task.task_id not in split_of:
            continue  # a splits file selects the active tasks, as the reference's does
        placed.append(Task(**{**asdict(task), "split": split}))
    placed.sort(key=lambda task: task.task_id)
    ids = [task.task_id for task in placed]
    if len(set(ids)) != len(ids):
        raise LoaderError(f"{products_path}: duplicate task ids")
    manifest = {}
    if (base / MANIFEST_FILE).exists():
        manifest = json.loads((base / MANIFEST_FILE).read_text(encoding="utf-8"))
    site = SiteConfig(**manifest["site"]) if "site" in manifest else SiteConfig()
    language = "zh" if any(_HAN.search(p.title) for p in products[:200]) else "en"
    return World(
        catalog=Catalog(products, language=language),
        tasks={task.task_id: task for task in placed},
        site=site,
        engine=engine,
        name=str(manifest.get("name") or base.name or "loaded"),
    )


def product_record(product: Product) -> dict[str, Any]:
    return {
        "asin": product.asin,
        "title": product.title,
        "shop_name": product.brand,
        "category": product.category,
        "attribute": list(product.attributes),
        "small_description": list(product.bullets),
        "full_description": product.description,
        **({"sub_title": list(product.sub_title)} if product.sub_title else {}),
        "pricing": list(product.pricing),
        "customization_options": product.raw_options(),
    }


def instruction_record(task: Task) -> dict[str, Any]:
    return {
        "task_id": task.task_id,
        "split": task.split,
        "instruction": task.instruction,
        "instruction_simple": task.instruction_simple,
        "attributes": list(task.attributes),
        "instruction_options": list(task.instruction_options),
        "price_upper": task.price_upper,
        "user_persona": task.persona,
        "persona_id": task.persona_id,
        "difficulty": task.difficulty,
        "gold_options": task.gold_options,
        "option_axes": list(task.option_axes),
        "budget_amount": task.budget_amount,
        "budget_approximate": task.budget_approximate,
        "persona_only": list(task.persona_only),
    }


def write_world(world: World, out: str | Path) -> dict[str, Any]:
    """products.json (public layout, tasks under their gold), splits.json, manifest.json."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    by_gold: dict[str, list[Task]] = {}
    for task in world.tasks.values():
        by_gold.setdefault(task.gold_asin, []).append(task)
    records = []
    for product in world.catalog.products:
        record = product_record(product)
        if product.asin in by_gold:
            record["instructions"] = [instruction_record(t) for t in by_gold[product.asin]]
        records.append(record)
    with (folder / PRODUCTS_FILE).open("w", encoding="utf-8") as handle:
        json.dump(records, handle, ensure_ascii=False)
    digests = split_digests(world.tasks.values())
    splits = {
        split: {
            "task_ids": world.task_ids(split),
            "task_count": len(world.task_ids(split)),
            "sha256": digests.get(split),
        }
        for split in SPLITS
    }
    (folder / SPLITS_FILE).write_text(
        json.dumps(
            {"schema_version": SPLITS_SCHEMA, "version": world.version, "splits": splits}, indent=1
        )
    )
    manifest = {**world.manifest(), "version": world.version}
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, ensure_ascii=False))
    return {"version": world.version, "folder": str(folder), "split_sha256": digests}
