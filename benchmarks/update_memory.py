"""Peak memory of one CPU-preset update step (`Policy.train_step`), measured in a fresh process.

    python benchmarks/update_memory.py                      # configs/cpu.toml, SmolLM2
    /usr/bin/time -v python benchmarks/update_memory.py     # the kernel's max RSS beside it
    python benchmarks/update_memory.py --model tiny         # a smoke run of the script itself

The batch is fixed and seeded, shaped like the preset's admitted episodes (8 episodes of about
1,050 tokens: a 600-token first prompt, then 4 turns of a 12-token reply that carries loss and a
100-token page that does not; about 48 of 1,050 tokens are generated, as the warm-start
trajectories measured in docs/trainer.md). Token ids are random, so no generation runs and the
figure is the update's alone: old log-probs, the step's optimizer updates, the log-probs after.

Figures: resident memory after loading (model, tokenizer) and the process's peak resident memory
(`getrusage` max RSS, what `/usr/bin/time -v` reports), to stdout and `--out` as JSON. Run it
once per code version to compare (a fresh process each time: peak RSS never goes down).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import time
from dataclasses import replace
from pathlib import Path

import psutil
import torch

from services.trainer.config import TrainerConfig
from services.trainer.policy import Policy
from shared.runtime.agent.advantage import TrainingSample
from shared.runtime.agent.decoding import CPU_DECODING
from shared.runtime.agent.models import resolve_model
from shared.runtime.agent.trajectory import Segment

FIRST_PROMPT, TURNS, REPLY, PAGE = 600, 4, 12, 100


def batch(vocab: int, episodes: int, seed: int) -> list[list[TrainingSample]]:
    """Seeded episodes shaped like the preset's (prompt, then reply/page turns)."""
    rng = random.Random(seed)
    out = []
    for index in range(episodes):
        parts = [(FIRST_PROMPT, 0)] + [(REPLY, 1), (PAGE, 0)] * TURNS
        ids, mask = [], []
        for length, generated in parts:
            ids += [rng.randrange(3, vocab) for _ in range(length)]
            mask += [generated] * length
        logprobs = [-rng.uniform(0.1, 3.0) if m else 0.0 for m in mask]
        segment = Segment(
            turns=list(range(TURNS)), token_ids=ids, loss_mask=mask, logprobs=logprobs
        )
        advantage = 1.0 if index % 2 else -1.0  # a group-normalised spread: real gradients
        out.append([TrainingSample(f"e{index}", f"g{index // 4}", segment, advantage)])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/cpu.toml")
    parser.add_argument("--model", default=None, help="smollm2, tiny or a model folder")
    parser.add_argument("--micro-batch-tokens", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--out", default="runs/update_memory.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    config = TrainerConfig.from_toml(args.config)
    if args.model:
        config = replace(config, model=args.model)
    if args.micro_batch_tokens:
        config = replace(config, micro_batch_tokens=args.micro_batch_tokens)
    policy = Policy.load(resolve_model(config.model), config, CPU_DECODING.temperature)
    vocab = policy.model.get_input_embeddings().weight.shape[0]
    episodes = batch(vocab, config.episodes_admitted_per_step, args.seed)
    loaded_gb = psutil.Process().memory_info().rss / 2**30
    began = time.perf_counter()
    stats = policy.train_step(episodes)
    seconds = time.perf_counter() - began
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
    result = {
        "config": args.config,
        "model": config.model,
        "micro_batch_tokens": config.micro_batch_tokens,
        "episodes": len(episodes),
        "tokens": stats.tokens,
        "generated_tokens": stats.generated_tokens,
        "updates": stats.updates,
        "rss_after_load_gb": round(loaded_gb, 3),
        "peak_rss_gb": round(peak_gb, 3),
        "train_step_s": round(seconds, 1),
        "loss": stats.loss,
    }
    print(json.dumps(result))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
