"""What a failure analyst reads out of a trajectory: queries, products opened, options chosen,
failed purchase attempts, and the gold facts a deployable text must not repeat."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from shared.runtime.agent.trajectory import Trajectory
from shared.runtime.leak import GoldFacts
from shared.runtime.leak.catalog import CatalogIndex
from shared.runtime.shopsim.product import Catalog
from shared.runtime.shopsim.reward import resolve_sku_price
from shared.runtime.shopsim.task import Task

_PRODUCT_ID = re.compile(r"^B0[0-9A-Z]{8}$")
_RESULT = re.compile(r"^\d+\. (\S+) \| (.*?) \| ", re.M)


@dataclass
class ProductVisit:
    step: int
    product_id: str
    title: str = ""
    brand: str = ""
    attributes: list[str] = field(default_factory=list)


@dataclass
class TraceFacts:
    queries: list[tuple[int, str]] = field(default_factory=list)  # (step, query)
    visits: list[ProductVisit] = field(default_factory=list)
    selections: dict[str, tuple[int, str]] = field(default_factory=dict)  # axis -> (step, value)
    blocked_buys: list[int] = field(default_factory=list)  # buy now refused: axes unset
    result_titles: dict[str, str] = field(default_factory=dict)
    purchased: str | None = None
    valid_actions: int = 0

    @property
    def last_visit(self) -> ProductVisit | None:
        return self.visits[-1] if self.visits else None


def read_trace(trajectory: Trajectory) -> TraceFacts:
    """The facts of one trajectory, step by step (steps are 0-based turns)."""
    facts = TraceFacts()
    for index, step in enumerate(trajectory.steps):
        # A refused action has no `action`; its reply still says what the agent tried.
        action, observation = (step.action or step.reply or "").strip(), step.observation or ""
        if step.action is not None and step.protocol_error is None:
            facts.valid_actions += 1
        for product_id, title in _RESULT.findall(observation):
            facts.result_titles[product_id] = title.strip()
        if action.startswith("search["):
            facts.queries.append((index, action[len("search[") : -1].casefold()))
        elif action.startswith("click["):
            value = action[len("click[") : -1]
            if _PRODUCT_ID.match(value) and observation.startswith("Page: product"):
                facts.visits.append(_visit(index, value, observation))
            elif "=" in value and step.env_reason == "ok":
                axis, chosen = value.split("=", 1)
                facts.selections[axis] = (index, chosen)
            elif (
                value == "buy now"
                and not step.done
                and (step.protocol_error or step.env_reason != "ok")
            ):
                facts.blocked_buys.append(index)
        if step.done and "You bought " in observation:
            facts.purchased = observation.split("You bought ", 1)[1].split(" ", 1)[0]
    return facts


def _visit(step: int, product_id: str, page: str) -> ProductVisit:
    def line(label: str) -> str:
        match = re.search(rf"^{label}: (.*)$", page, re.M)
        return match.group(1).strip() if match else ""

    attributes = [a.strip().casefold() for a in line("Key attributes").split(";") if a.strip()]
    return ProductVisit(step, product_id, line("Title"), line("Brand"), attributes)


def gold_price(task: Task, catalog: Catalog) -> float | None:
    """The price of the gold variant (gold product, gold options), if the listing fixes one."""
    if task.gold_asin not in catalog:
        return None
    product = catalog[task.gold_asin]
    resolution = resolve_sku_price(product.raw_options(), product.pricing, task.gold_options)
    return resolution.price if resolution.verifiable else None


@lru_cache(maxsize=4)  # one world's catalog serves every card of a round
def catalog_index(catalog: Catalog) -> CatalogIndex:
    """What the firewall measures distinctiveness against: the world's catalog."""
    return CatalogIndex.of_products(catalog)


def gold_facts(
    task: Task, facts: TraceFacts, *, price: float | None = None, catalog: Catalog | None = None
) -> GoldFacts:
    """Everything instance-specific the analyst saw: the firewall's terms for this task (the
    gold price when the caller gives it: `gold_price`), measured against the world's catalog
    when given."""
    visited = [visit.title for visit in facts.visits if visit.title]
    titles = [*visited, *facts.result_titles.values()]
    purchase = next(
        (visit.title for visit in reversed(facts.visits) if visit.product_id == facts.purchased),
        "",
    )
    brands = {visit.brand for visit in facts.visits if visit.brand}
    # ShopSim titles open with the brand: the first word of every title seen is a brand seen.
    brands |= {title.split(" ", 1)[0] for title in [task.gold_title, *titles] if title}
    return GoldFacts(
        task_id=task.task_id,
        goal_title=task.gold_title,
        purchase_title=purchase,
        visited_titles=tuple(dict.fromkeys(titles)),
        brands_seen=tuple(sorted(brands)),
        gold_options=tuple(dict.fromkeys([*task.gold_options.values()])),
        product_ids=tuple(
            dict.fromkeys(
                [task.gold_asin, *facts.result_titles, *(v.product_id for v in facts.visits)]
            )
        ),
        price=price,
        catalog=None if catalog is None else catalog_index(catalog),
    )
