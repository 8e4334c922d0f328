"""The `simulated` policy: a TEST DOUBLE with known per-chunk effects, for fast runs of the loop.

`SimulatedPolicyModel` says how likely an episode succeeds: each task has a bare success
probability (hash-seeded in `base_success`), and each injected chunk version adds a known,
hash-seeded effect in [-chunk_effect / 2, chunk_effect]. The trainer's simulated rollouts draw
outcomes from it directly; `SimulatedBackend` plays real ShopSim episodes with it, so gates run
through the evaluator's ordinary rollout path:

* on an episode's first turn it finds the task by its instruction in its own copy of the world
  and reads the injected chunks from the skill block (`<skill id=... version=...>`);
* one hash-seeded draw against the success probability decides the episode: a success plays the
  oracle's actions (the world's gold, which only a test double may read), one per turn; a
  failure answers with a turn that hits the token limit without an action, which the runtime
  scores 0 (`generation_length`).

ShopSim pages are a deterministic function of the actions, so the backend's copy of the episode
stays in step with the runtime's. A checkpoint folder that holds `simulated-policy.json` is a
simulated checkpoint: `make_backend("simulated", folder)` builds the backend from it.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from shared.contracts.hashing import hash_uniform
from shared.runtime.agent.backends.base import TurnFailure, TurnOutput, TurnRequest
from shared.runtime.agent.decoding import DecodingConfig

POLICY_FILE = "simulated-policy.json"
_SKILL_TAG = re.compile(r'<skill id="([^"]+)" version="(\d+)">')


@dataclass(frozen=True)
class SimulatedPolicyModel:
    """TEST DOUBLE: success probability = task base rate + known effects of injected chunks."""

    seed: int = 0
    base_success: tuple[float, float] = (0.1, 0.7)
    chunk_effect: float = 0.15
    env_preset: str = "test"
    env_path: str | None = None

    def base_rate(self, task_id: str) -> float:
        low, high = self.base_success
        return low + (high - low) * hash_uniform(self.seed, "simulated-base", task_id)

    def effect(self, version: str) -> float:
        """The true effect of one chunk version ('slug@version')."""
        draw = hash_uniform(self.seed, "simulated-effect", version)
        return self.chunk_effect * (1.5 * draw - 0.5)

    def success_probability(self, task_id: str, injected: Sequence[str]) -> float:
        probability = self.base_rate(task_id) + sum(self.effect(v) for v in injected)
        return min(max(probability, 0.0), 1.0)

    def write(self, folder: str | Path) -> Path:
        path = Path(folder) / POLICY_FILE
        path.write_text(json.dumps(asdict(self), indent=1) + "\n")
        return path

    @classmethod
    def read(cls, folder: str | Path) -> SimulatedPolicyModel:
        data = json.loads((Path(folder) / POLICY_FILE).read_text())
        data["base_success"] = tuple(data["base_success"])
        return cls(**data)


@functools.lru_cache(maxsize=2)
def _world_env(preset: str, path: str | None) -> Any:
    """The backend's own copy of the world, loaded once per process (a paper world takes ~10 s)."""
    from shared.runtime.shopsim.env import ShopEnv

    return ShopEnv.load(path) if path else ShopEnv.from_preset(preset)


@dataclass
class _Episode:
    task_id: str | None
    succeed: bool
    episode: Any = None
    result: Any = None
    oracle: Any = None
    actions: list[str] = field(default_factory=list)


class SimulatedBackend:
    """TEST DOUBLE policy backend: oracle or a failed turn, by a known success probability."""

    name = "simulated"
    renderer = None

    def __init__(
        self, policy: SimulatedPolicyModel, env: Any, *, model_id: str, checkpoint_id: str
    ) -> None:
        self.policy, self.env = policy, env
        self.model_id, self.checkpoint_id = model_id, checkpoint_id
        self._episodes: dict[str, _Episode] = {}
        self._by_instruction: dict[str, str] | None = None

    @classmethod
    def from_checkpoint(
        cls, folder: str | Path, *, checkpoint_id: str | None = None, **_options: Any
    ) -> SimulatedBackend:
        """The backend a simulated checkpoint folder describes (device/dtype options unused)."""
        policy = SimulatedPolicyModel.read(folder)
        return cls(
            policy,
            _world_env(policy.env_preset, policy.env_path),
            model_id=f"simulated-test-double-seed{policy.seed}",
            checkpoint_id=checkpoint_id or Path(folder).name,
        )

    def _task_of(self, messages: Sequence[dict[str, Any]]) -> str | None:
        if self._by_instruction is None:
            self._by_instruction = {}
            for task_id, task in self.env.world.tasks.items():
                self._by_instruction.setdefault(task.instruction_simple.strip(), task_id)
        first_user = next((m for m in messages if m.get("role") == "user"), None)
        for line in str((first_user or {}).get("content", "")).splitlines():
            task_id = self._by_instruction.get(line.strip())
            if task_id is not None:
                return task_id
        return None

    def _start(self, request: TurnRequest) -> _Episode:
        from shared.runtime.shopsim.agents import OracleAgent

        task_id = self._task_of(request.messages)
        system = next((m for m in request.messages if m.get("role") == "system"), {})
        injected = [f"{s}@{v}" for s, v in _SKILL_TAG.findall(str(system.get("content", "")))]
        if task_id is None:
            return _Episode(None, False)
        probability = self.policy.success_probability(task_id, injected)
        draw = hash_uniform(self.policy.seed, "simulated-episode", request.key, *injected)
        state = _Episode(task_id, draw < probability)
        if state.succeed:
            state.episode, state.result = self.env.reset(task_id)
            state.oracle = OracleAgent(self.env.task(task_id))
        return state

    def generate(
        self, requests: Sequence[TurnRequest], decoding: DecodingConfig
    ) -> list[TurnOutput | TurnFailure]:
        outputs: list[TurnOutput | TurnFailure] = []
        for request in requests:
            state = self._episodes.get(request.key)
            if state is None:
                state = self._episodes[request.key] = self._start(request)
            if not state.succeed or state.result.done:
                # no action and the token limit: the runtime ends the episode, reward 0
                outputs.append(
                    TurnOutput(
                        text="",
                        finish_reason="length",
                        assistant_message={"role": "assistant", "content": ""},
                        completion_tokens=request.max_new_tokens,
                    )
                )
                continue
            action = state.oracle.act(state.result)
            state.result = state.episode.step(action)
            state.actions.append(action)
            outputs.append(
                TurnOutput(
                    text=action,
                    finish_reason="stop",
                    assistant_message={"role": "assistant", "content": action},
                    completion_tokens=len(action.split()),
                )
            )
        return outputs

    def release(self, key: str) -> None:
        self._episodes.pop(key, None)

    def close(self) -> None:
        self._episodes.clear()
