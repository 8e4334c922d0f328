"""Time one trainer rollout step per phase, and the update beside a bare PyTorch update.

    python benchmarks/trainer_step.py                       # configs/cpu.toml, SmolLM2, 3 runs
    python benchmarks/trainer_step.py --model runs/warm-start/warm-XXXX --runs 5
    python benchmarks/trainer_step.py --model tiny --runs 2 # a smoke run of the script itself

Each run is one rollout step of the preset with the trainer's own code: waves of groups through
the agent runtime on ShopSim (`services.trainer.rollout_step.rollout_step`, skill-free: an
empty bank),
then `Policy.train_step` (old log-probs recomputed, then the step's optimizer updates). Phases:

* generation: the model's prefill and decode, prompt rendering and parsing (rollout wall time
  less the environment's share);
* scoring: ShopSim steps and reward scoring inside the rollouts, plus the group filter;
* old log-probs: the no-grad recomputation before the first update;
* update: every optimizer update of the step (forward, loss, backward, clip, AdamW).

Beside the update, in the same run and on the same admitted batch, a bare PyTorch loop does what
any GRPO update must: per global batch, forward the same micro-batches (same packing), a
log-prob-times-advantage loss on the generated tokens, backward, one AdamW step, on a copy of the
same weights. The ratio is the trainer's update tokens/s over the bare loop's (goal >= 0.8).
Several runs give the spread. Figures go to stdout and `runs/trainer_step.json`.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from services.trainer.config import TrainerConfig
from services.trainer.policy import Policy, micro_batches
from services.trainer.rollout_step import TaskOrder, rollout_step
from services.trainer.rollouts import EngineRollouts
from services.trainer.treatments import CurriculumState
from shared.runtime.agent.advantage import training_samples
from shared.runtime.agent.backends.transformers_backend import TransformersBackend
from shared.runtime.agent.decoding import CPU_DECODING, PAPER_DECODING
from shared.runtime.agent.models import resolve_model
from shared.runtime.agent.runner import RolloutConfig
from shared.runtime.shopsim.env import ShopEnv

PHASES = ("generation", "scoring", "old_logprobs", "update")


def bare_update(model: Any, episodes: list, config: TrainerConfig, temperature: float) -> float:
    """Forward + backward + AdamW on the batch, nothing else; returns seconds."""
    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad],
        lr=config.lr,
        betas=tuple(config.betas),
        weight_decay=config.weight_decay,
    )
    model.train()
    began = time.perf_counter()
    for start in range(0, len(episodes), config.global_batch):
        samples = [s for episode in episodes[start : start + config.global_batch] for s in episode]
        rows = [sample.segment.token_ids for sample in samples]
        optimizer.zero_grad(set_to_none=True)
        for batch in micro_batches([len(row) for row in rows], config.micro_batch_tokens):
            width = max(len(rows[i]) for i in batch)
            ids = torch.zeros((len(batch), width), dtype=torch.long)
            attention = torch.zeros((len(batch), width), dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.float32)
            for position, index in enumerate(batch):
                length = len(rows[index])
                ids[position, :length] = torch.tensor(rows[index])
                attention[position, :length] = 1
                mask[position, :length] = torch.tensor(samples[index].segment.loss_mask)
            advantages = torch.tensor([samples[i].advantage for i in batch])[:, None]
            logits = model(input_ids=ids, attention_mask=attention).logits[:, :-1]
            logprobs = torch.log_softmax(logits.float() / temperature, -1)
            logprobs = logprobs.gather(2, ids[:, 1:, None]).squeeze(2)
            loss = -(logprobs * advantages * mask[:, 1:]).sum() / mask.sum().clamp(min=1)
            loss.backward()
        optimizer.step()
    model.eval()
    return time.perf_counter() - began


def one_run(config: TrainerConfig, model_path: Path, run: int) -> dict[str, Any]:
    decoding = PAPER_DECODING if config.decoding == "paper" else CPU_DECODING
    policy = Policy.load(model_path, config, temperature=decoding.temperature)
    bare_model = copy.deepcopy(policy.accelerator.unwrap_model(policy.model))
    backend = TransformersBackend(
        policy.sampling_model, policy.tokenizer, model_id=config.model, checkpoint_id=f"bench-{run}"
    )
    rollout = RolloutConfig(
        decoding=decoding,
        concurrency=config.concurrency,
        max_turns=config.max_turns,
        **({"prompt_version": config.prompt_version} if config.prompt_version else {}),
    )
    env = ShopEnv.from_preset(config.env_preset)
    source = EngineRollouts(env, backend, rollout, split=config.split)
    empty = CurriculumState(bank_id=0, bank_hash="none", q=config.q, seed=config.seed, chunks=())
    tasks = TaskOrder(tuple(source.train_task_ids()), config.seed + run)

    began = time.perf_counter()
    outcome = rollout_step(
        source,
        empty,
        [],
        tasks,
        round_index=0,
        step=1,
        first_group_index=0,
        group_size=config.group_size,
        groups_per_wave=config.groups_per_wave,
        groups_admitted=config.groups_admitted,
        spread_epsilon=config.spread_epsilon,
        max_consecutive_failures=config.max_consecutive_failed_groups,
    )
    rollout_s = time.perf_counter() - began
    engine = source.engine.stats  # the last wave's; sum over waves below
    env_share = engine.env_s / engine.wall_s if engine.wall_s else 0.0
    trajectories = [t for group in outcome.admitted for t in group.trajectories]
    samples = training_samples(trajectories)
    by_episode: dict[str, list] = {}
    for sample in samples:
        by_episode.setdefault(sample.episode_id, []).append(sample)
    episodes = [by_episode[t.episode_id] for t in trajectories if t.episode_id in by_episode]

    stats = policy.train_step(episodes)
    bare_s = bare_update(bare_model, episodes, config, policy.temperature)
    generate_s = outcome.timings["generate_s"]
    return {
        "run": run,
        "waves": outcome.waves,
        "episodes_generated": outcome.episodes_generated,
        "episodes_admitted": outcome.episodes_admitted,
        "generated_tokens": stats.generated_tokens,
        "tokens": stats.tokens,
        "updates": stats.updates,
        "seconds": {
            "generation": generate_s * (1 - env_share),
            "scoring": generate_s * env_share + outcome.timings["filter_s"],
            "old_logprobs": stats.old_logprobs_s,
            "update": stats.update_s,
            "rollout_wall": rollout_s,
        },
        "update_tokens_per_s": stats.tokens / stats.update_s,
        "bare_tokens_per_s": stats.tokens / bare_s,
        "update_vs_bare": bare_s / stats.update_s,
    }


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/cpu.toml")
    parser.add_argument("--model", default=None, help="smollm2, tiny or a model folder")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--out", default="runs/trainer_step.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = TrainerConfig.from_toml(args.config)
    if args.model:
        config = replace(config, model=args.model)
    model_path = resolve_model(config.model)

    runs = []
    for run in range(args.runs):
        result = one_run(config, model_path, run)
        runs.append(result)
        seconds = result["seconds"]
        print(
            f"run {run}: "
            + "  ".join(f"{phase} {seconds[phase]:.1f}s" for phase in PHASES)
            + f"  | {result['episodes_admitted']}/{result['episodes_generated']} episodes, "
            f"{result['tokens']} tokens, update {result['update_tokens_per_s']:.0f} tok/s vs "
            f"bare {result['bare_tokens_per_s']:.0f} tok/s = {result['update_vs_bare']:.2f}x",
            flush=True,
        )
    summary = {
        "config": args.config,
        "model": str(model_path),
        "threads": args.threads,
        "runs": runs,
        "phases_s": {phase: spread([r["seconds"][phase] for r in runs]) for phase in PHASES},
        "update_tokens_per_s": spread([r["update_tokens_per_s"] for r in runs]),
        "bare_tokens_per_s": spread([r["bare_tokens_per_s"] for r in runs]),
        "update_vs_bare": spread([r["update_vs_bare"] for r in runs]),
    }
    print("\nphase          median    min    max   (seconds per rollout step)")
    for phase in PHASES:
        figures = summary["phases_s"][phase]
        print(f"{phase:<13} {figures['median']:7.1f} {figures['min']:6.1f} {figures['max']:6.1f}")
    ratio = summary["update_vs_bare"]
    print(
        f"update vs bare forward+backward+AdamW: {ratio['median']:.2f}x "
        f"(min {ratio['min']:.2f}, max {ratio['max']:.2f}; goal >= 0.8)"
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
