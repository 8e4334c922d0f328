"""One round's training: `steps_per_round` rollout steps on the pinned bank S_t (waves, filter,
the GRPO updates, one metrics line each), then the round's end: S_t unchanged, checkpoint,
evidence. A resumed round redoes the steps after the last checkpoint with the same tasks,
group indices and treatments."""

from __future__ import annotations

import sys
import time
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from services.trainer.bank_resolution import curriculum_from_bank, pin_bank
from services.trainer.checkpoints import save_checkpoint
from services.trainer.evidence import record_evidence
from services.trainer.metrics import MetricsLog, step_metrics
from services.trainer.policy import Policy
from services.trainer.rollout_step import GroupOutcome, TaskOrder, rollout_step
from services.trainer.rollouts import RolloutSource
from services.trainer.run_context import RunContext, RunState
from services.trainer.treatments import CurriculumState
from shared.contracts.chunks import InjectedChunk
from shared.contracts.registry_api.client import Unavailable
from shared.runtime.agent.advantage import training_samples


def train_round(
    context: RunContext,
    state: RunState,
    policy: Policy,
    source: RolloutSource,
    tasks: TaskOrder,
    metrics: MetricsLog,
) -> None:
    config, round_index = context.config, state.round
    registry, record = context.clients.registry, context.record.round(round_index)
    try:
        bank = pin_bank(registry, state.bank_id, record.bank_hash)
    except Unavailable as error:
        raise context.registry_unavailable(error) from None
    curriculum, injected = curriculum_from_bank(bank, config)
    record.update(
        bank_id=bank.id,
        bank_hash=bank.content_hash,
        curriculum_state_id=curriculum.state_id,
        q=curriculum.q,
        rho={chunk.slug: chunk.rho for chunk in curriculum.chunks},
    )
    context.record.save()
    all_wrong: list[tuple[int, GroupOutcome]] = []
    first = state.step - round_index * config.steps_per_round
    with _progress(context) as progress:
        bar = progress.add_task(
            f"round {round_index} (bank {bank.id})", total=config.steps_per_round, completed=first
        )
        for step_in_round in range(first, config.steps_per_round):
            line, generated = _train_step(
                context, state, policy, source, tasks, curriculum, injected, step_in_round
            )
            all_wrong += [(line["step"], group) for group in generated if group.all_wrong]
            metrics.append(line)
            state.metrics_lines += 1
            context.heartbeat()
            summary = (
                f"round {round_index} step {line['step']}: reward {line['reward'] or 0:.3f} "
                f"loss {line['loss']:+.4f}"
            )
            progress.update(bar, advance=1, description=summary)
            if getattr(context.console, "structured", False):  # JSON logs: a record per step
                context.console.print(summary)
            elif not sys.stdout.isatty():  # logs (kubectl logs, files): one plain line per step
                print(summary, flush=True)
    try:
        pin_bank(registry, bank.id, bank.content_hash)  # the bank never changes inside an interval
    except Unavailable as error:
        raise context.registry_unavailable(error) from None
    save_checkpoint(context, state, policy, round_index)
    if context.config.skill_loop:
        record_evidence(context, state, round_index, all_wrong)
    else:  # an ablation without the slow loop: counted, never analysed
        context.record.round(round_index).update(all_wrong_groups=len(all_wrong))
        context.record.save()


def _train_step(
    context: RunContext,
    state: RunState,
    policy: Policy,
    source: RolloutSource,
    tasks: TaskOrder,
    curriculum: CurriculumState,
    injected: list[InjectedChunk],
    step_in_round: int,
) -> tuple[dict[str, Any], list[GroupOutcome]]:
    """One rollout step and its updates; returns its metrics line and the generated groups."""
    config, round_index = context.config, state.round
    step = state.step + 1
    began = time.perf_counter()
    outcome = rollout_step(
        source,
        curriculum,
        injected,
        tasks,
        round_index=round_index,
        step=step,
        first_group_index=state.next_group_index,
        group_size=config.group_size,
        groups_per_wave=config.groups_per_wave,
        groups_admitted=config.groups_admitted,
        spread_epsilon=config.spread_epsilon,
        max_consecutive_failures=config.max_consecutive_failed_groups,
    )
    trajectories = [t for group in outcome.admitted for t in group.trajectories]
    by_episode: dict[str, list] = {}
    for sample in training_samples(trajectories):
        by_episode.setdefault(sample.episode_id, []).append(sample)
    episodes = [by_episode[t.episode_id] for t in trajectories if t.episode_id in by_episode]
    stats = policy.train_step(episodes)
    pushed = time.perf_counter()
    source.weights_changed(f"{context.run_id}-s{step}")  # rollout servers: save and push
    push_s = time.perf_counter() - pushed
    state.step, state.next_group_index = step, outcome.next_group_index
    line = step_metrics(
        outcome,
        stats,
        curriculum,
        round_index=round_index,
        step=step,
        step_in_round=step_in_round + 1,
        timings={**outcome.timings, "push_s": push_s, "step_s": time.perf_counter() - began},
    )
    return line, outcome.generated


def _progress(context: RunContext) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=None if getattr(context.console, "structured", False) else context.console,
        transient=False,
        disable=getattr(context.console, "structured", False),
    )
