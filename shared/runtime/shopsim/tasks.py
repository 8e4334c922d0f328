"""Task, persona and split generation over a generated catalogue.

For each gold product the generator picks attribute constraints that tell it apart from its
family (greedy cover of the near-identical siblings), option values, and an optional budget on
the SKU price; then it moves a difficulty-dependent share of those constraints out of the
visible instruction into the persona document. Families, personas and instructions never cross
splits. Every task is checked to be solvable: its gold with the recorded selection scores
R_success = 1 under the reward.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.runtime.shopsim.catalog import Family, GeneratedCatalog
from shared.runtime.shopsim.product import Product
from shared.runtime.shopsim.reward import resolve_sku_price, score_purchase
from shared.runtime.shopsim.reward.text import render_option_value
from shared.runtime.shopsim.task import SPLITS, Task
from shared.runtime.shopsim.vocabulary import SubCategory


@dataclass(frozen=True)
class Knobs:
    attributes: tuple[int, int]
    options: tuple[int, int]
    budget_probability: float
    persona_share: float


DIFFICULTIES: dict[str, Knobs] = {
    "easy": Knobs((4, 4), (1, 1), 0.4, 0.1),
    "medium": Knobs((4, 5), (1, 2), 0.6, 0.35),
    "hard": Knobs((5, 5), (2, 2), 0.8, 0.55),
}


@dataclass(frozen=True)
class TaskSettings:
    counts: Mapping[str, int]
    difficulty_mix: tuple[tuple[str, float], ...] = (("easy", 0.3), ("medium", 0.4), ("hard", 0.3))
    tasks_per_persona: tuple[int, int] = (1, 4)
    golds_per_family: int = 2
    approximate_budget_share: float = 0.3
    persona_detail: str = "full"  # "full" or "compact" (shorter documents for small models)
    knobs: Mapping[str, Knobs] = field(default_factory=lambda: dict(DIFFICULTIES))


_FIRST = ("Maya", "Liam", "Sofia", "Noah", "Ava", "Ethan", "Zoe", "Lucas", "Emma", "Omar",
          "Priya", "Diego", "Hana", "Felix", "Grace", "Mateo", "Nora", "Kenji", "Leah", "Samir",
          "Ruth", "Owen", "Iris", "Theo", "Lena", "Marco", "Chloe", "Aisha", "Jonah",
          "Elena")  # fmt: skip
_LAST = ("Chen", "Garcia", "Patel", "Kim", "Nguyen", "Smith", "Okafor", "Rossi", "Haddad",
         "Novak", "Silva", "Tanaka", "Brown", "Larsen", "Moreau", "Ali", "Cohen", "Ivanova",
         "Mensah", "Walsh")  # fmt: skip
_JOBS = ("nurse", "software developer", "teacher", "graphic designer", "electrician", "student",
         "accountant", "chef", "physical therapist", "retired engineer", "barista",
         "sales manager", "architect", "photographer", "warehouse lead")  # fmt: skip
_PLACES = ("Portland, OR", "Austin, TX", "Leeds, UK", "Toronto, ON", "Denver, CO",
           "Melbourne, AU", "Chicago, IL", "Dublin, IE", "Phoenix, AZ", "Boston, MA")  # fmt: skip
_HOBBIES = ("runs on weekends", "cooks for a big family", "works from a small apartment",
            "travels often for work", "is training for a half marathon", "gardens on a balcony",
            "has two dogs", "just moved into a new flat", "games late at night",
            "camps every summer")  # fmt: skip
_TIERS = ("frugal", "moderate", "premium")
_OPENERS = ("I'm looking for {noun}", "I need {noun}", "Help me find {noun}",
            "I want to buy {noun}", "Please find me {noun}")  # fmt: skip
_MUST_NOTES = ("For {noun}, I only buy ones with {items}.",
               "My {noun} has to have {items}.",
               "I always look for {items} when I shop for {a_noun}.",
               "Whenever I get {a_noun}, it must come with {items}.")  # fmt: skip
_OPTION_NOTES = ("I want my {noun} in {axis} {value}.",
                 "For {a_noun} I always pick {axis} {value}.",
                 "When buying {a_noun}, choose {axis} {value} for me.")  # fmt: skip
_HARD_BUDGET_NOTES = ("I never spend more than {money} on {a_noun}.",
                      "My limit for {a_noun} is {money}.")  # fmt: skip
_APPROX_BUDGET_NOTES = ("I usually spend around {money} on {a_noun}.",
                        "Roughly {money} is what I pay for {a_noun}.")  # fmt: skip
_MASS_NOUNS = {"dog food", "cat litter", "green tea", "olive oil", "shampoo"}


def with_article(noun: str) -> str:
    if noun.endswith("s") or noun in _MASS_NOUNS:
        return noun
    return ("an " if noun[0] in "aeiou" else "a ") + noun


def join_words(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def money(value: float) -> str:
    return f"${value:,.0f}" if float(value).is_integer() else f"${value:,.2f}"


def budget_phrase(amount: float, approximate: bool) -> str:
    return ("around " if approximate else "under ") + money(amount)


def _budget_step(price: float) -> float:
    return 5.0 if price < 20 else 10.0 if price < 100 else 25.0 if price < 500 else 50.0


def budget_for(price: float, approximate: bool) -> tuple[float, float]:
    """(stated amount, effective ceiling) for a gold price, the ceiling never below it."""
    step = _budget_step(price)
    if not approximate:
        amount = math.ceil(price / step) * step
        return amount, amount
    amount = max(step, round(price / step) * step)
    while round(amount * 1.10, 8) < price:
        amount += step
    return amount, round(amount * 1.10, 8)  # the annotation path's rounding (spec 8.2)


@dataclass
class _Draft:
    """A task before its persona exists."""

    gold: Product
    sub: SubCategory
    difficulty: str
    attributes: list[str]
    options: list[tuple[str, str]]
    gold_options: dict[str, str]
    budget: tuple[float, float, bool] | None  # amount, ceiling, approximate
    hidden: set[str]  # constraint keys only the persona carries
    opener: str
    redundant: str | None = None


def _constraint_keys(draft: _Draft) -> list[str]:
    keys = [f"attribute:{value}" for value in draft.attributes]
    keys += [f"option:{axis}" for axis, _ in draft.options]
    if draft.budget is not None:
        keys.append("budget")
    return keys


def _instruction(draft: _Draft, *, visible_only: bool) -> str:
    hide = draft.hidden if visible_only else set()
    noun = with_article(draft.sub.noun)
    attributes = [a for a in draft.attributes if f"attribute:{a}" not in hide]
    text = draft.opener.format(noun=noun)
    if attributes:
        text += " with " + join_words(attributes)
    text += "."
    options = [f"{axis} {value}" for axis, value in draft.options if f"option:{axis}" not in hide]
    if options:
        text += f" I'd like {join_words(options)}."
    if draft.budget is not None and "budget" not in hide:
        amount, _, approximate = draft.budget
        text += f" My budget is {budget_phrase(amount, approximate)}."
    return text


class _Generator:
    def __init__(self, generated: GeneratedCatalog, settings: TaskSettings, seed: int) -> None:
        self.generated = generated
        self.catalog = generated.catalog
        self.settings = settings
        self.seed = seed
        self.rng = random.Random(f"shopsim-tasks:{seed}")
        self.brands = sorted({family.brand for family in generated.families})

    # -- constraints ------------------------------------------------------------------------
    def _siblings(self, family: Family, gold_position: int) -> list[Product]:
        return [self.catalog.products[p] for p in family.members if p != gold_position]

    def _pick_attributes(self, gold: Product, siblings: list[Product], count: int) -> list[str]:
        """Greedy cover: each pick rules out the most siblings that still match so far."""
        rng = self.rng
        remaining = list(siblings)
        dims = list(range(len(gold.attributes)))
        rng.shuffle(dims)
        chosen: list[int] = []
        while len(chosen) < min(count, len(dims)):
            candidates = [d for d in dims if d not in chosen]
            best = max(
                candidates,
                key=lambda d: sum(s.attributes[d] != gold.attributes[d] for s in remaining),
            )
            chosen.append(best)
            remaining = [s for s in remaining if s.attributes[best] == gold.attributes[best]]
        return [gold.attributes[d] for d in chosen]

    def _pick_options(
        self, gold: Product, siblings: list[Product], count: int
    ) -> tuple[list[tuple[str, str]], dict[str, str]]:
        rng = self.rng
        axes = [axis for axis, entries in gold.options if entries]
        wanted = rng.sample(axes, min(count, len(axes)))
        chosen: list[tuple[str, str]] = []
        selection: dict[str, str] = {}
        for axis, entries in gold.options:
            values = [render_option_value(value) for value, _ in entries]
            if axis in wanted:
                # Prefer a value that fewer siblings offer: the option then discriminates.
                def offered_by(value: str, axis: str = axis) -> int:
                    return sum(value in s.rendered_options().get(axis, ()) for s in siblings)

                rng.shuffle(values)
                value = min(values, key=offered_by)
                chosen.append((axis, value))
            else:
                prices = [price for _, price in entries]
                if len({p for p in prices if p is not None}) > 1:
                    cheapest = min(range(len(entries)), key=lambda i: (prices[i] or 0.0, i))
                    value = values[cheapest]
                else:
                    value = rng.choice(values)
            selection[axis] = value
        order = [axis for axis, _ in gold.options]
        chosen.sort(key=lambda item: order.index(item[0]))
        return chosen, selection

    def draft(self, family: Family, gold_position: int, difficulty: str) -> _Draft:
        rng, knobs = self.rng, self.settings.knobs[difficulty]
        gold = self.catalog.products[gold_position]
        sub = self.generated.subcategories[family.subcategory]
        siblings = self._siblings(family, gold_position)
        attributes = self._pick_attributes(gold, siblings, rng.randint(*knobs.attributes))
        options, selection = self._pick_options(gold, siblings, rng.randint(*knobs.options))
        budget = None
        resolution = resolve_sku_price(gold.raw_options(), gold.pricing, selection)
        if resolution.verifiable and rng.random() < knobs.budget_probability:
            approximate = rng.random() < self.settings.approximate_budget_share
            amount, ceiling = budget_for(float(resolution.price or 0.0), approximate)
            budget = (amount, ceiling, approximate)
        draft = _Draft(
            gold, sub, difficulty, attributes, options, selection, budget, set(),
            rng.choice(_OPENERS),
        )  # fmt: skip
        keys = _constraint_keys(draft)
        hidden = {key for key in keys if rng.random() < knobs.persona_share}
        visible_attributes = [k for k in keys if k.startswith("attribute:") and k not in hidden]
        if not visible_attributes:  # the visible text always keeps one attribute
            hidden.discard(rng.choice([k for k in keys if k.startswith("attribute:")]))
        draft.hidden = hidden
        shown = [a for a in attributes if f"attribute:{a}" not in hidden]
        if shown and rng.random() < 0.3:
            draft.redundant = rng.choice(shown)
        return draft

    # -- personas ---------------------------------------------------------------------------
    def _notes(self, noun: str, entry: dict[str, Any]) -> list[str]:
        """Persona-carried constraints as first-person sentences: each keeps the exact
        attribute or option phrase (so the reward can match it) and names the product type."""
        rng, article = self.rng, with_article(noun)
        notes = []
        must = entry.get("must_have") or []
        if must:
            template = rng.choice(_MUST_NOTES)
            notes.append(template.format(noun=noun, a_noun=article, items=join_words(must)))
        for axis, value in (entry.get("options") or {}).items():
            template = rng.choice(_OPTION_NOTES)
            notes.append(template.format(noun=noun, a_noun=article, axis=axis, value=value))
        if entry.get("budget"):
            amount, approximate = entry["budget"]
            template = _APPROX_BUDGET_NOTES if approximate else _HARD_BUDGET_NOTES
            notes.append(rng.choice(template).format(a_noun=article, money=money(amount)))
        return notes

    def persona(self, drafts: list[_Draft], index: int) -> dict[str, Any]:
        rng, compact = self.rng, self.settings.persona_detail == "compact"
        first, last = rng.choice(_FIRST), rng.choice(_LAST)
        age, job, place = rng.randint(21, 72), rng.choice(_JOBS), rng.choice(_PLACES)
        notes: list[str] = []
        for draft in drafts:
            entry: dict[str, Any] = {}
            must = [a for a in draft.attributes if f"attribute:{a}" in draft.hidden]
            if draft.redundant:
                must.append(draft.redundant)
            entry["must_have"] = must
            entry["options"] = {
                axis: value for axis, value in draft.options if f"option:{axis}" in draft.hidden
            }
            if draft.budget is not None and "budget" in draft.hidden:
                entry["budget"] = (draft.budget[0], draft.budget[2])
            notes += self._notes(draft.sub.noun, entry)
        taken = {draft.sub.name for draft in drafts}
        others = [s for s in self.generated.subcategories if s.name not in taken]
        for sub in rng.sample(others, 1 if compact else rng.randint(2, 3)):
            noise: dict[str, Any] = {"must_have": rng.sample(sub.values(), rng.randint(1, 2))}
            if rng.random() < 0.4:
                axis = rng.choice(sub.axes)
                noise["options"] = {axis.name: rng.choice(axis.values)}
            notes += self._notes(sub.noun, noise)
        rng.shuffle(notes)
        gold_brands = {draft.gold.brand for draft in drafts}
        all_brands = self.brands
        favorite = rng.sample(all_brands, min(2, len(all_brands)))
        if rng.random() < 0.5:
            favorite[0] = drafts[0].gold.brand
        avoided = [b for b in all_brands if b not in gold_brands and b not in favorite]
        persona: dict[str, Any] = {
            "name": f"{first} {last}",
            "age": age,
            "occupation": job,
            "location": place,
        }
        if not compact:
            persona["profile"] = (
                f"{first} is a {age}-year-old {job} from {place} who {rng.choice(_HOBBIES)}."
            )
        persona["spending_tier"] = rng.choice(_TIERS)
        persona["favorite_brands"] = sorted(set(favorite))
        if avoided and not compact:
            persona["avoided_brands"] = [rng.choice(avoided)]
        persona["shopping_notes"] = notes
        searches = []
        for sub in rng.sample(self.generated.subcategories, 1 if compact else 3):
            searches.append(f"{sub.noun} {rng.choice(sub.values())}")
        persona["recent_searches"] = searches
        purchases = rng.sample(self.catalog.products, 1 if compact else 2)
        persona["recent_purchases"] = [p.title.split(",")[0] for p in purchases]
        return persona

    # -- splits -----------------------------------------------------------------------------
    def allocate_families(self) -> dict[str, list[int]]:
        """Whole families go to one split, in proportion to its task count (with headroom)."""
        order = list(range(len(self.generated.families)))
        self.rng.shuffle(order)
        counts = self.settings.counts
        per_family = self.settings.golds_per_family
        allocation: dict[str, list[int]] = {split: [] for split in counts}
        capacity = dict.fromkeys(counts, 0)
        cursor = 0
        for split in sorted(counts, key=lambda s: counts[s]):
            need = math.ceil(counts[split] * 1.25) + 2
            while capacity[split] < need and cursor < len(order):
                family = self.generated.families[order[cursor]]
                allocation[split].append(order[cursor])
                capacity[split] += min(per_family, len(family.members))
                cursor += 1
            if capacity[split] < need:
                raise ValueError(
                    f"catalogue too small for {counts[split]} {split} tasks: "
                    f"use more products or fewer tasks"
                )
        return allocation

    def drafts_for(
        self, split: str, families: list[int], seen_text: dict[str, str]
    ) -> list[_Draft]:
        rng, settings = self.rng, self.settings
        names = [name for name, _ in settings.difficulty_mix]
        weights = [weight for _, weight in settings.difficulty_mix]
        candidates = []
        for family_index in families:
            family = self.generated.families[family_index]
            members = list(family.members)
            rng.shuffle(members)
            candidates += [(family, p) for p in members[: settings.golds_per_family]]
        rng.shuffle(candidates)
        drafts: list[_Draft] = []
        for family, position in candidates:
            if len(drafts) == settings.counts[split]:
                break
            for _ in range(3):
                draft = self.draft(family, position, rng.choices(names, weights)[0])
                text = _instruction(draft, visible_only=True)
                if seen_text.get(text, split) == split:
                    seen_text[text] = split
                    drafts.append(draft)
                    break
        if len(drafts) < settings.counts[split]:
            raise ValueError(f"could only draft {len(drafts)} of {settings.counts[split]} tasks")
        return drafts


def _group_personas(
    drafts: list[_Draft], rng: random.Random, sizes: tuple[int, int]
) -> list[list[_Draft]]:
    """Consecutive drafts share a persona, one task per sub-category per persona."""
    groups: list[list[_Draft]] = []
    current: list[_Draft] = []
    target = rng.randint(*sizes)
    for draft in drafts:
        if len(current) >= target or any(d.sub.name == draft.sub.name for d in current):
            groups.append(current)
            current, target = [], rng.randint(*sizes)
        current.append(draft)
    if current:
        groups.append(current)
    return groups


def generate_tasks(
    generated: GeneratedCatalog, settings: TaskSettings, seed: int = 0
) -> list[Task]:
    """Tasks for every split in `settings.counts`, ids `task-000001`... in split order."""
    unknown = set(settings.counts) - set(SPLITS)
    if unknown:
        raise ValueError(f"unknown splits {sorted(unknown)}; use {SPLITS}")
    generator = _Generator(generated, settings, seed)
    allocation = generator.allocate_families()
    seen_text: dict[str, str] = {}
    tasks: list[Task] = []
    persona_number = 0
    for split in (s for s in SPLITS if s in settings.counts):
        drafts = generator.drafts_for(split, allocation[split], seen_text)
        for group in _group_personas(drafts, generator.rng, settings.tasks_per_persona):
            persona_number += 1
            persona_id = f"persona-{persona_number:05d}"
            persona = generator.persona(group, persona_number)
            for draft in group:
                tasks.append(_finish(draft, split, len(tasks) + 1, persona, persona_id))
    return tasks


def _finish(
    draft: _Draft, split: str, number: int, persona: dict[str, Any], persona_id: str
) -> Task:
    gold = draft.gold
    task = Task(
        task_id=f"task-{number:06d}",
        split=split,
        instruction=_instruction(draft, visible_only=False),
        instruction_simple=_instruction(draft, visible_only=True),
        attributes=tuple(draft.attributes),
        instruction_options=tuple(value for _, value in draft.options),
        price_upper=None if draft.budget is None else draft.budget[1],
        persona=persona,
        gold_asin=gold.asin,
        gold_title=gold.title,
        gold_category=gold.category,
        gold_options=dict(draft.gold_options),
        option_axes=tuple(axis for axis, _ in draft.options),
        budget_amount=None if draft.budget is None else draft.budget[0],
        budget_approximate=bool(draft.budget and draft.budget[2]),
        persona_id=persona_id,
        persona_only=tuple(sorted(draft.hidden)),
        difficulty=draft.difficulty,
    )
    breakdown, _ = score_purchase(gold.reward_view(), task.goal(), task.gold_options)
    if breakdown.r_success != 1:
        raise AssertionError(f"{task.task_id}: the gold does not satisfy its own goal")
    return task
