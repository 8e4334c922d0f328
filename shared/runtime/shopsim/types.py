"""The environment contract. The agent runtime and every service program against these types;
the ShopSim implementation fills them. Change them only with all their users in view."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Page = Literal["search", "results", "item", "attributes", "done"]

# Reason codes of the last action's result, as the observation ends with them.
ReasonCode = Literal[
    "ok",
    "invalid_format",
    "empty_argument",
    "search_unavailable",
    "already_selected",
    "incomplete_options",
    "unavailable_action",
    "multiple_actions_not_allowed",
]

TerminationReason = Literal["purchase", "action_limit", "generation_length"]


@dataclass(frozen=True)
class PublicState:
    """What a policy may know about the page besides the observation text."""

    page: Page
    clickables: tuple[str, ...]  # exact values `click[...]` accepts on this page
    search_available: bool  # only on the search home page
    step: int  # actions taken so far, invalid ones included
    max_steps: int


@dataclass(frozen=True)
class RewardBreakdown:
    """Reward components computed at `buy now` (all zeros for an episode without purchase)."""

    r_type: float
    r_att: float
    r_option: float
    r_price: float
    r_loose: float
    r_strict: float
    r_success: int
    num_attr_matches: int = 0
    num_option_matches: int = 0
    category_match: bool = False
    title_score: float = 0.0
    target_asin_match: bool = False
    price_verifiable: bool = False
    price_status: str = "unverifiable"
    resolved_price: float | None = None
    price_method: str | None = None
    termination_reason: TerminationReason = "purchase"

    @property
    def reward(self) -> float:
        """The primary scalar reward: the strict reward."""
        return self.r_strict

    def components(self) -> dict[str, float]:
        """The seven reward components, as gates and trajectories record them."""
        return {
            "r_strict": self.r_strict,
            "r_success": float(self.r_success),
            "r_type": self.r_type,
            "r_att": self.r_att,
            "r_option": self.r_option,
            "r_price": self.r_price,
            "r_loose": self.r_loose,
        }


@dataclass(frozen=True)
class StepResult:
    observation: str
    state: PublicState
    reward: float  # r_strict once done by purchase, else 0.0
    done: bool
    reason: ReasonCode
    breakdown: RewardBreakdown | None = None  # set when done
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskView:
    """What the policy sees of a task: the visible instruction and the persona document."""

    task_id: str
    split: str
    instruction: str  # the simple instruction
    persona: dict[str, Any]


class Episode(Protocol):
    """One live episode. Many share one catalog and index in memory."""

    task: TaskView

    def step(self, action: str) -> StepResult: ...


class Environment(Protocol):
    version: str  # environment version string recorded in every trajectory

    def task_ids(self, split: str) -> list[str]: ...

    def reset(self, task_id: str, seed: int = 0) -> tuple[Episode, StepResult]:
        """Open an episode on the search home page; the result's observation is the first."""
        ...
