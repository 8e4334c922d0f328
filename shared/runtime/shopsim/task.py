"""The task record: what the policy sees (simple instruction, persona) and what only the
reward and diagnostics see (full instruction, goal, gold)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shared.runtime.shopsim.reward import RewardGoal
from shared.runtime.shopsim.types import TaskView

SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class Task:
    task_id: str
    split: str
    instruction: str  # the complete instruction (private)
    instruction_simple: str  # what the policy sees
    attributes: tuple[str, ...]
    instruction_options: tuple[str, ...]
    price_upper: float | None
    persona: dict[str, Any]
    gold_asin: str
    gold_title: str
    gold_category: str
    # Diagnostics: the selection the oracle makes, the axes of the goal options, the budget as
    # stated, which constraints only the persona carries, and the difficulty knobs.
    gold_options: dict[str, str] = field(default_factory=dict)
    option_axes: tuple[str, ...] = ()
    budget_amount: float | None = None
    budget_approximate: bool = False
    persona_id: str = ""
    persona_only: tuple[str, ...] = ()
    difficulty: str = "medium"

    def goal(self) -> RewardGoal:
        return RewardGoal(
            asin=self.gold_asin,
            name=self.gold_title,
            category=self.gold_category,
            attributes=self.attributes,
            goal_options=list(self.instruction_options),
            price_upper=self.price_upper,
        )

    def view(self) -> TaskView:
        return TaskView(
            task_id=self.task_id,
            split=self.split,
            instruction=self.instruction_simple,
            persona=self.persona,
        )
