"""The gym-style environment that implements `types.Environment` / `types.Episode`.

    env = ShopEnv.from_preset("test")              # or ShopEnv(world)
    episode, first = env.reset("task-000001", seed=0)
    result = episode.step("search[noise cancelling headphones]")

Episodes are light: each holds a `Site` (page state) over the world's shared catalogue and
index, so thousands can run concurrently in one process.
"""

from __future__ import annotations

from typing import Any

from shared.runtime.shopsim.reward import no_purchase_breakdown, reward_detail, score_purchase
from shared.runtime.shopsim.site import Site, SiteConfig
from shared.runtime.shopsim.task import Task
from shared.runtime.shopsim.types import RewardBreakdown, StepResult, TaskView, TerminationReason
from shared.runtime.shopsim.world import World


class EpisodeOver(RuntimeError):
    """`step` was called on an episode that has already ended."""


class ShopEpisode:
    """One live episode: `step(action)` until `done`."""

    def __init__(self, world: World, task: Task, seed: int, site: SiteConfig) -> None:
        assert world.index is not None
        self._task = task
        self.task: TaskView = task.view()
        self.seed = seed  # recorded only: pages are a deterministic function of the actions
        self.site = Site(world.catalog, world.index, site)
        self.steps = 0
        self.done = False
        self.breakdown: RewardBreakdown | None = None
        self.actions: list[str] = []

    @property
    def max_steps(self) -> int:
        return self.site.config.max_steps

    def first(self) -> StepResult:
        return self._result(0.0, "ok", {})

    def step(self, action: str) -> StepResult:
        if self.done:
            raise EpisodeOver(f"episode of {self.task.task_id} is over; reset to start another")
        self.steps += 1
        self.actions.append(action if isinstance(action, str) else repr(action))
        outcome = self.site.act(action)
        info: dict[str, Any] = {"action_valid": outcome.ok, "message": outcome.message}
        if outcome.ok and outcome.message == "purchase":
            return self._purchase(info)
        if self.steps >= self.max_steps:
            return self.terminate("action_limit", _reason=outcome.reason, _info=info)
        return self._result(0.0, outcome.reason, info)

    def terminate(
        self,
        reason: TerminationReason = "generation_length",
        *,
        _reason: str = "ok",
        _info: dict[str, Any] | None = None,
    ) -> StepResult:
        """End without a purchase (the runtime calls this for `generation_length`): reward 0."""
        if self.done:
            raise EpisodeOver(f"episode of {self.task.task_id} is over")
        self.done = True
        self.breakdown = no_purchase_breakdown(reason)
        # The reference shows the page the last action left when the step cap ends an episode.
        keep = reason == "action_limit" and not self.site.config.hints
        last_page = self.site.observation(self.steps) if keep else None
        self.site.finish()
        info = dict(_info or {})
        info["reward_detail"] = reward_detail(self.breakdown)
        return self._result(0.0, _reason, info, observation=last_page)

    def _purchase(self, info: dict[str, Any]) -> StepResult:
        site = self.site
        assert site.product is not None
        breakdown, resolution = score_purchase(
            site.product.reward_view(),
            self._task.goal(),
            dict(site.selection),
            price_resolution=site.price_resolution,
        )
        self.done, self.breakdown = True, breakdown
        site.finish()
        info["reward_detail"] = reward_detail(breakdown, self._task.price_upper, resolution)
        info["purchased_asin"] = site.product.asin
        info["selected_options"] = dict(site.selection)
        return self._result(breakdown.reward, "ok", info)

    def _result(
        self, reward: float, reason: str, info: dict[str, Any], observation: str | None = None
    ) -> StepResult:
        info.setdefault("page_state", self.site.describe())
        if self.done:
            info.setdefault("termination_reason", self.breakdown.termination_reason)  # type: ignore[union-attr]
        return StepResult(
            observation=self.site.observation(self.steps) if observation is None else observation,
            state=self.site.public_state(self.steps),
            reward=reward,
            done=self.done,
            reason=reason,  # type: ignore[arg-type]
            breakdown=self.breakdown if self.done else None,
            info=info,
        )


class ShopEnv:
    """`types.Environment` over a `World`; cheap to create, many may share one world."""

    def __init__(self, world: World, *, site: SiteConfig | None = None) -> None:
        self.world = world
        self.site = site or world.site

    @classmethod
    def from_preset(cls, name: str, seed: int | None = None) -> ShopEnv:
        from shared.runtime.shopsim.presets import load_world

        return cls(load_world(name, seed))

    @classmethod
    def load(cls, path: str) -> ShopEnv:
        """A world written by `intraskill env build` or a public ShopSimulator data folder."""
        from shared.runtime.shopsim.loader import load_world_dir

        return cls(load_world_dir(path))

    @property
    def version(self) -> str:
        if self.site == self.world.site:
            return self.world.version
        return self.world.version_for(self.site)

    @property
    def site_style(self) -> str:
        return self.site.style

    def task_ids(self, split: str) -> list[str]:
        return self.world.task_ids(split)

    def task(self, task_id: str) -> Task:
        """The full task record (gold included): for oracles, analysts and tests only."""
        try:
            return self.world.tasks[task_id]
        except KeyError:
            raise KeyError(f"unknown task id {task_id!r}") from None

    def task_view(self, task_id: str) -> TaskView:
        return self.task(task_id).view()

    def reset(self, task_id: str, seed: int = 0) -> tuple[ShopEpisode, StepResult]:
        episode = ShopEpisode(self.world, self.task(task_id), seed, self.site)
        return episode, episode.first()
