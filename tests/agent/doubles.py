"""Test doubles for the agent runtime's unit tests (never imported by the package).

`ScriptedShop` implements the ShopSim environment contract with a three-page shop whose reward is
known in advance; `ScriptedBackend` is a policy backend that replies from a script but returns
exact tokens through a real chat renderer, so the runtime's segmenting is exercised for real.
Integration with the real ShopSim lives in test_shopsim_integration.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from shared.runtime.agent.backends.base import (
    TurnFailure,
    TurnOutput,
    TurnRequest,
    token_level_output,
)
from shared.runtime.agent.chat import ChatRenderer
from shared.runtime.agent.decoding import DecodingConfig
from shared.runtime.shopsim.types import PublicState, RewardBreakdown, StepResult, TaskView

SEARCH_PAGE = "Home. Type search[your query] to find products."


@dataclass
class ScriptedEpisode:
    task: TaskView
    max_steps: int
    fail_on: str | None = None
    page: str = "search"
    steps: int = 0
    item: str | None = None
    size: str | None = None
    actions: list[str] = field(default_factory=list)

    def _state(self) -> PublicState:
        clickables: tuple[str, ...] = ()
        if self.page == "results":
            clickables = ("back to search", "B001", "B002 [refurb]", "next >")
        elif self.page == "item":
            clickables = ("back to search", "< prev", "size=S", "size=M", "buy now")
        return PublicState(self.page, clickables, self.page == "search", self.steps, self.max_steps)  # type: ignore[arg-type]

    def _result(self, observation: str, reason: str = "ok") -> StepResult:
        return StepResult(observation, self._state(), 0.0, False, reason)  # type: ignore[arg-type]

    def first(self) -> StepResult:
        return self._result(SEARCH_PAGE)

    terminated: str | None = None

    def terminate(self, reason: str) -> StepResult:
        """Like ShopSim's: the runtime ends the episode without a purchase."""
        self.terminated = reason
        self.page = "done"
        zero = RewardBreakdown(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, termination_reason=reason)  # type: ignore[arg-type]
        return StepResult("Episode over.", self._state(), 0.0, True, "ok", zero)

    def step(self, action: str) -> StepResult:
        if self.fail_on and self.fail_on in action:
            raise RuntimeError("scripted environment failure")
        self.actions.append(action)
        self.steps += 1
        state = self._state()
        if action.startswith("search[") and state.search_available:
            self.page = "results"
            return self._result(
                f"Results for {action[7:-1]}: [B001] Red shoe $20 [B002 [refurb]] Blue shoe $9"
            )
        value = action[6:-1] if action.startswith("click[") else None
        if value is None or value not in state.clickables:
            return self._result("Invalid action.", "unavailable_action")
        if value == "back to search":
            self.page, self.item, self.size = "search", None, None
            return self._result(SEARCH_PAGE)
        if self.page == "results" and value in ("B001", "B002 [refurb]"):
            self.page, self.item = "item", value
            return self._result(f"Item {value}. Sizes: S, M. [buy now]")
        if value.startswith("size="):
            self.size = value[5:]
            return self._result(f"Item {self.item}, size {self.size} chosen.")
        if value == "buy now":
            if self.size is None:
                return self._result("Choose every option first.", "incomplete_options")
            right = float(self.item == "B001")
            size = float(self.size == "M")
            strict = right * size
            breakdown = RewardBreakdown(
                r_type=1.0,
                r_att=right,
                r_option=size,
                r_price=1.0,
                r_loose=(1 + right + size) / 3,
                r_strict=strict,
                r_success=int(strict == 1.0),
            )
            self.page = "done"
            return StepResult(
                "Thank you for your purchase.", self._state(), strict, True, "ok", breakdown
            )
        return self._result("Nothing happens.", "unavailable_action")


class PlainEpisode(ScriptedEpisode):
    """An episode with only the contract's `step` (no `terminate`)."""

    terminate = None  # type: ignore[assignment]


class ScriptedShop:
    """A tiny deterministic shop: search -> results -> item -> size -> buy now."""

    version = "scripted-shop-test-v1"
    episode_class: type[ScriptedEpisode] = ScriptedEpisode

    def __init__(
        self, max_steps: int = 30, fail_reset: str | None = None, fail_step: str | None = None
    ) -> None:
        self.max_steps = max_steps
        self.fail_reset, self.fail_step = fail_reset, fail_step
        self.episodes: list[ScriptedEpisode] = []

    def task_ids(self, split: str) -> list[str]:
        return [f"{split}-{index}" for index in range(10)]

    def reset(self, task_id: str, seed: int = 0) -> tuple[ScriptedEpisode, StepResult]:
        if self.fail_reset == task_id:
            raise RuntimeError("scripted reset failure")
        task = TaskView(
            task_id, "train", "Buy red shoes in size M.", {"name": "Ann", "likes": ["red", "cheap"]}
        )
        episode = self.episode_class(task, self.max_steps, self.fail_step)
        self.episodes.append(episode)
        return episode, episode.first()


Script = Callable[[TurnRequest, int], str | tuple[str, str]]


class ScriptedBackend:
    """Replies from a script (request, turn) -> text or (text, 'length'), with exact tokens."""

    name = "scripted"
    model_id = "scripted-model"
    checkpoint_id = "scripted-ckpt"

    def __init__(
        self, renderer: ChatRenderer, script: Script, fail_keys: Sequence[str] = ()
    ) -> None:
        self.renderer = renderer
        self.script = script
        self.fail_keys = set(fail_keys)
        self.calls: list[list[TurnRequest]] = []
        self.turns: dict[str, int] = {}
        self.released: list[str] = []

    def generate(
        self, requests: Sequence[TurnRequest], decoding: DecodingConfig
    ) -> list[TurnOutput | TurnFailure]:
        self.calls.append(list(requests))
        outputs: list[TurnOutput | TurnFailure] = []
        for request in requests:
            if request.key in self.fail_keys:
                outputs.append(TurnFailure("scripted backend failure"))
                continue
            turn = self.turns.get(request.key, 0)
            self.turns[request.key] = turn + 1
            reply = self.script(request, turn)
            finish = "stop"
            if isinstance(reply, tuple):
                reply, finish = reply
            ids = self.renderer.encode(reply)
            if finish == "stop":
                ids.append(self.renderer.tokenizer.eos_token_id)
            outputs.append(
                token_level_output(
                    self.renderer,
                    request.prompt_ids or (),
                    ids,
                    [-0.5] * len(ids),
                    len(ids) if finish == "length" else request.max_new_tokens,
                )
            )
        return outputs

    def release(self, key: str) -> None:
        self.released.append(key)

    def close(self) -> None:
        pass
