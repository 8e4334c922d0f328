"""One rollout step: waves of groups under group-consistent treatments, then the dynamic filter.

A wave is `groups_per_wave` groups of `group_size` siblings. Every sibling of a group shares the
task, the environment seed, the treatment (mask) and the curriculum state; only the policy's
sampling differs (each sibling has its own episode id, from which the runtime seeds sampling).
After a wave, each group is checked for consistency and judged by the filter in group order;
another wave follows only while the filter asks for one.

Common random numbers: a group's coordinates are (run seed, rollout step, group index within
the step). Its task, environment seed, episode ids (so the sampling seeds) and treatment
uniforms are functions of those alone, never of the bank, q, rho or how many waves earlier steps
took; two runs with one seed (the arms of an experiment) give group g of step s the same task,
environment and sampling seeds, and differ only where the treatment compares its uniforms with
their own q and rho.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from services.trainer.filtering import Verdict, WaveFilter, group_verdict
from services.trainer.rollouts import RolloutSource
from services.trainer.treatments import (
    CurriculumState,
    Treatment,
    check_group_consistent,
    sample_treatment,
)
from shared.contracts.chunks import InjectedChunk
from shared.contracts.hashing import hash_key
from shared.runtime.agent.runner import EpisodeSpec
from shared.runtime.agent.trajectory import Trajectory


@dataclass(frozen=True)
class TaskOrder:
    """The train task of each (rollout step, group index): a seeded permutation per step, so
    one step's groups see distinct tasks (while there are enough) and no step's tasks depend
    on another step's wave count."""

    task_ids: tuple[str, ...]
    seed: int

    def task(self, step: int, group: int) -> str:
        order = _step_order(self.task_ids, self.seed, step)
        return order[group % len(order)]


@lru_cache(maxsize=4)
def _step_order(task_ids: tuple[str, ...], seed: int, step: int) -> tuple[str, ...]:
    order = list(task_ids)
    random.Random(f"{seed}:tasks:{step}").shuffle(order)
    return tuple(order)


@dataclass
class GroupOutcome:
    index: int  # run-wide running count: the group's label and evidence key
    task_id: str
    treatment: Treatment
    trajectories: list[Trajectory]
    verdict: Verdict

    @property
    def all_wrong(self) -> bool:
        """All siblings scored and none succeeded: evidence for the slow loop."""
        return self.verdict != "technical_failure" and all(
            t.components.get("r_success", 0.0) == 0.0 for t in self.trajectories
        )


@dataclass
class StepOutcome:
    admitted: list[GroupOutcome]
    generated: list[GroupOutcome]
    wave: WaveFilter
    waves: int
    next_group_index: int
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def episodes_generated(self) -> int:
        return sum(len(group.trajectories) for group in self.generated)

    @property
    def episodes_admitted(self) -> int:
        return sum(len(group.trajectories) for group in self.admitted)


def group_id(state: CurriculumState, round_index: int, group_index: int) -> str:
    """Carries the curriculum state's fingerprint with every episode of the group (a label:
    no seed derives from it)."""
    return f"r{round_index}-{state.state_id[:16]}-g{group_index:07d}"


def episode_seed(seed: int, step: int, group: int) -> int:
    """One environment seed per group: siblings see the same environment."""
    return int.from_bytes(hash_key(seed, "episode", step, group)[:4], "big")


def episode_id(step: int, group: int, sibling: int) -> str:
    """The sibling's id, from which the runtime seeds its sampling: CRN coordinates only."""
    return f"s{step:06d}-g{group:04d}-e{sibling}"


def group_specs(
    state: CurriculumState,
    bank: Sequence[InjectedChunk],
    round_index: int,
    group_index: int,
    step: int,
    group: int,
    task_id: str,
    group_size: int,
) -> tuple[Treatment, list[EpisodeSpec]]:
    """Group `group` of rollout step `step` (`group_index` counts groups over the run)."""
    treatment = sample_treatment(state, step, group)
    gid = group_id(state, round_index, group_index)
    seed = episode_seed(state.seed, step, group)
    specs = [
        EpisodeSpec.masked(
            task_id,
            seed,
            bank,
            treatment.inclusion,
            bank_id=str(state.bank_id),
            bank_hash=state.bank_hash,
            group_id=gid,
            episode_id=episode_id(step, group, sibling),
        )
        for sibling in range(group_size)
    ]
    return treatment, specs


def sibling_fields(trajectory: Trajectory) -> dict[str, object]:
    """What siblings of one group must share (the state id travels in the group id)."""
    p = trajectory.provenance
    return {
        "task_id": trajectory.task_id,
        "group_id": trajectory.group_id,
        "bank_id": p.bank_id,
        "bank_hash": p.bank_hash,
        "inclusion": p.inclusion,
        "injected": p.injected,
        "skill_block_hash": p.skill_block_hash,
        "prompt_fingerprint": p.prompt_fingerprint,
        "env_version": p.env_version,
        "seed": p.seed,
        "checkpoint_id": p.checkpoint_id,
    }


def rollout_step(
    source: RolloutSource,
    state: CurriculumState,
    bank: Sequence[InjectedChunk],
    tasks: TaskOrder,
    *,
    round_index: int,
    step: int,
    first_group_index: int,
    group_size: int,
    groups_per_wave: int,
    groups_admitted: int,
    spread_epsilon: float,
    max_consecutive_failures: int,
) -> StepOutcome:
    """Generate waves until `groups_admitted` groups pass the filter (rollout step `step`)."""
    if len(bank) != len(state.chunks):
        raise ValueError("the bank and the curriculum state list different chunks")
    wave = WaveFilter(target=groups_admitted, max_consecutive_failures=max_consecutive_failures)
    generated: list[GroupOutcome] = []
    timings = {"generate_s": 0.0, "filter_s": 0.0}
    next_index, waves = first_group_index, 0
    while wave.needs_wave():
        planned = []
        for _ in range(groups_per_wave):
            group = next_index - first_group_index
            task_id = tasks.task(step, group)
            treatment, specs = group_specs(
                state, bank, round_index, next_index, step, group, task_id, group_size
            )
            planned.append((next_index, task_id, treatment, specs))
            next_index += 1
        wave.submit(groups_per_wave)
        waves += 1
        began = time.perf_counter()
        trajectories = source.run([spec for *_, specs in planned for spec in specs])
        timings["generate_s"] += time.perf_counter() - began
        began = time.perf_counter()
        for position, (index, task_id, treatment, _) in enumerate(planned):
            siblings = trajectories[position * group_size : (position + 1) * group_size]
            check_group_consistent([sibling_fields(t) for t in siblings])
            if siblings[0].provenance.inclusion != list(treatment.inclusion):
                raise RuntimeError(f"group {index}: episodes carry another mask than drawn")
            verdict = group_verdict(
                [t.scored for t in siblings], [t.reward for t in siblings], epsilon=spread_epsilon
            )
            outcome = GroupOutcome(index, task_id, treatment, list(siblings), verdict)
            generated.append(outcome)
            wave.offer(outcome, verdict)
        timings["filter_s"] += time.perf_counter() - began
    return StepOutcome(
        admitted=list(wave.kept),
        generated=generated,
        wave=wave,
        waves=waves,
        next_group_index=next_index,
        timings=timings,
    )
