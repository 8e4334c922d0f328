"""Can luck or the agent's own competence verify a card? The paired check against a hollow card.

On naive failures of the `cpu` world's train tasks (the procedural TEST DOUBLE, slip 0, no
skill block), each card's repair is checked from the first step (branch 0) by a blind agent
that is the procedural TEST DOUBLE with `competence` 0.5 (it follows each mechanism unprompted
in half its episodes): k continuations with the card's chunk and k without, same seeds.
Cards: the hollow "Try harder." and each library template. Counted per card kind:

- any-with: at least one continuation with the card succeeded (what "verified" meant with
  one or a few trials and no arm without the card);
- verified: the paired rule (at least one success with, strictly more with than without).

    python benchmarks/paired_verification.py --failures 86 --k 4

Prints the table and writes paired_verification.json under --out
(default runs/benchmarks/paired_verification/). Test-double figures, never a product figure.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from services.analyst.counterfactual_trials import verify_repair
from services.analyst.mechanisms import LIBRARY
from shared.contracts.chunks import ChunkContent
from shared.runtime.agent.backends import make_backend
from shared.runtime.agent.runner import EpisodeSpec, RolloutConfig, run_episodes
from shared.runtime.shopsim.env import ShopEnv

REPO = Path(__file__).resolve().parents[1]
HOLLOW = ChunkContent(title="Try harder.", applies_when="Always.", procedure=["Try harder."],
                      verify="You tried harder.", avoid="Giving up.")  # fmt: skip


def naive_failures(env, count: int, max_turns: int | None):
    policy = make_backend("procedural", "naive", slip=0.0)
    tasks = env.task_ids("train")[: count * 3]
    specs = [EpisodeSpec(task_id=task, seed=index) for index, task in enumerate(tasks)]
    config = RolloutConfig(concurrency=32, max_turns=max_turns)
    runs = run_episodes(env, policy, specs, config)
    return [t for t in runs if t.scored and t.components["r_success"] == 0.0][:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--failures", type=int, default=86)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--competence", type=float, default=0.5)
    parser.add_argument("--max-turns", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=REPO / "runs/benchmarks/paired_verification")
    args = parser.parse_args()
    env = ShopEnv.from_preset("cpu")
    failures = naive_failures(env, args.failures, args.max_turns)
    agent = make_backend("procedural", "blind", slip=0.0, competence=args.competence)
    config = RolloutConfig(concurrency=1, max_turns=args.max_turns)
    cards = {"hollow": HOLLOW, **{key: m.template for key, m in LIBRARY.items()}}
    rows = []
    for name, content in cards.items():
        any_with = verified = 0
        for index, trace in enumerate(failures):
            check = verify_repair(env, trace, [], content, target_chunk_id=None, branch_step=0,
                                  agent=agent, seed=args.seed + 100 * index, k=args.k,
                                  config=config)  # fmt: skip
            any_with += check.with_successes >= 1
            verified += check.verified
        rows.append({"card": name, "failures": len(failures), "any_with": any_with,
                     "verified": verified})  # fmt: skip
        print(f"{name:22s} failures {len(failures):3d}  any-with {any_with:3d}  "
              f"verified {verified:3d}", flush=True)  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    settings = {key: str(value) for key, value in vars(args).items()}
    (args.out / "paired_verification.json").write_text(
        json.dumps({"settings": settings, "rows": rows}, indent=1)
    )


if __name__ == "__main__":
    main()
