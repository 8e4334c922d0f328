"""Compliance probe: does the policy follow what its skill block says?

Every reading hint (`reading_hints.py`) asks for an outcome-neutral style. The probe runs the
policy on the same validation tasks and seeds once bare and once per hint with only that hint in
the skill block, and counts, among the episodes that reached the point where the hint applies,
how many acted it out. A policy that reads the block follows each hint far more often with it
than without; one that does not follows it at its base rate either way. Paired by task:
McNemar's exact test on the tasks observable in both runs.

    intraskill train compliance-probe --config configs/cpu.toml --model runs/warm-start/warm-X
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from services.trainer.reading_hints import HINTS, ReadingHint
from shared.runtime.agent.trajectory import Trajectory
from shared.runtime.shopsim.env import ShopEnv

PROBE_SCHEMA = "intraskill-compliance-probe-v1"
# A hint is read when it is followed at least this much more often with it than without it,
# and the paired difference is significant (McNemar, exact, two-sided).
MIN_LIFT, ALPHA = 0.2, 0.05


def compare(
    hint: ReadingHint,
    with_hint: Sequence[Trajectory],
    without: Sequence[Trajectory],
    env: ShopEnv,
) -> dict[str, Any]:
    """Followed-rate with and without one hint, paired by task."""
    from statsmodels.stats.contingency_tables import mcnemar

    def flags(trajectories: Sequence[Trajectory]) -> dict[str, bool | None]:
        return {t.task_id: hint.followed(t, env.task_view(t.task_id)) for t in trajectories}

    on, off = flags(with_hint), flags(without)

    def rate(values: Mapping[str, bool | None]) -> dict[str, Any]:
        seen = [value for value in values.values() if value is not None]
        return {
            "observable": len(seen),
            "followed": sum(seen),
            "rate": sum(seen) / len(seen) if seen else None,
        }

    both = [task for task in on if on[task] is not None and off.get(task) is not None]
    only_with = sum(on[task] and not off[task] for task in both)
    only_without = sum(off[task] and not on[task] for task in both)
    p_value = (
        float(mcnemar([[0, only_with], [only_without, 0]], exact=True).pvalue)
        if only_with + only_without
        else 1.0
    )
    with_rate, without_rate = rate(on), rate(off)
    lift = (
        with_rate["rate"] - without_rate["rate"]
        if with_rate["rate"] is not None and without_rate["rate"] is not None
        else None
    )
    return {
        "with": with_rate,
        "without": without_rate,
        "lift": lift,
        "paired": {
            "tasks": len(both),
            "followed_only_with": only_with,
            "followed_only_without": only_without,
            "mcnemar_p": p_value,
        },
        "read": bool(
            lift is not None and lift >= MIN_LIFT and p_value < ALPHA and only_with > only_without
        ),
        "success_with": _success(with_hint),
    }


def _success(trajectories: Sequence[Trajectory]) -> float:
    return sum(t.components.get("r_success") == 1.0 for t in trajectories) / max(
        1, len(trajectories)
    )


def run_probe(
    backend: Any,
    env: ShopEnv,
    *,
    task_ids: Sequence[str],
    seed: int,
    rollout: Any,
    hints: Sequence[ReadingHint] = tuple(HINTS.values()),
    on_episode: Any = None,
) -> dict[str, Any]:
    """The bare run and one run per hint on `task_ids`, each episode with the same seed."""
    from shared.runtime.agent.runner import EpisodeSpec, RolloutEngine

    def play(chunks: tuple) -> list[Trajectory]:
        specs = [EpisodeSpec(task_id, seed, chunks=chunks) for task_id in task_ids]
        return RolloutEngine(env, backend, rollout).run(specs, on_episode)

    bare = play(())
    rows = {hint.name: compare(hint, play((hint.chunk(),)), bare, env) for hint in hints}
    return {
        "schema": PROBE_SCHEMA,
        "tasks": len(task_ids),
        "seed": seed,
        "checkpoint_id": getattr(backend, "checkpoint_id", None),
        "success_bare": _success(bare),
        "hints": rows,
        "rule": f"read = lift >= {MIN_LIFT} and McNemar p < {ALPHA}",
        "reads_skill_block": any(row["read"] for row in rows.values()),
    }


def format_probe(result: Mapping[str, Any]) -> str:
    lines = [
        f"compliance probe on {result['tasks']} val tasks  (checkpoint {result['checkpoint_id']},"
        f" bare success {result['success_bare']:.1%})",
        f"  {'hint':18} {'with':>14} {'without':>14} {'lift':>7} {'McNemar p':>10}  read",
    ]
    for name, row in result["hints"].items():

        def cell(side: Mapping[str, Any]) -> str:
            if side["rate"] is None:
                return "n/a"
            return f"{side['rate']:.0%} of {side['observable']}"

        lift = "n/a" if row["lift"] is None else f"{row['lift']:+.0%}"
        lines.append(
            f"  {name:18} {cell(row['with']):>14} {cell(row['without']):>14} {lift:>7} "
            f"{row['paired']['mcnemar_p']:>10.3g}  {'yes' if row['read'] else 'no'}"
        )
    verdict = "reads" if result["reads_skill_block"] else "does NOT read"
    lines.append(f"  the policy {verdict} its skill block ({result['rule']})")
    return "\n".join(lines)


cli = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@cli.command()
def command(
    model: Annotated[Path, typer.Option(help="the policy's model folder (a warm start's)")],
    config: Annotated[Path, typer.Option(help="trainer config: layout, decoding, turn cap")] = Path(
        "configs/cpu.toml"
    ),
    tasks: Annotated[int, typer.Option(min=1, help="validation tasks (the first N)")] = 100,
    out: Annotated[Path | None, typer.Option(help="write the result as JSON")] = None,
    threads: Annotated[int | None, typer.Option(help="torch CPU threads")] = None,
) -> None:
    """Followed-rate of each reading hint with vs without it in the skill block."""
    from rich.progress import Progress

    from services.trainer.config import ConfigError, TrainerConfig
    from services.trainer.warm_start import WarmStartPlan
    from shared.runtime.agent.backends import make_backend
    from shared.runtime.agent.runner import RolloutConfig

    try:
        plan = WarmStartPlan.from_trainer_config(TrainerConfig.from_toml(config))
    except (ConfigError, OSError) as error:
        print(f"intraskill train compliance-probe: {error}", file=sys.stderr)
        raise typer.Exit(2) from None
    if not (model / "config.json").exists():
        print(f"intraskill train compliance-probe: no model in {model}", file=sys.stderr)
        raise typer.Exit(2)
    if threads:
        import torch

        torch.set_num_threads(threads)
    env = ShopEnv.from_preset(plan.env_preset)
    task_ids = env.task_ids("val")[:tasks]
    rollout = RolloutConfig(
        prompt_version=plan.prompt_version,
        decoding=plan.decoding,
        concurrency=16,
        max_turns=plan.max_turns,
    )
    backend = make_backend("transformers", str(model), dtype=plan.dtype, device=plan.device)
    try:
        with Progress(transient=True) as progress:
            bar = progress.add_task("probe episodes", total=len(task_ids) * (1 + len(HINTS)))
            result = run_probe(
                backend, env, task_ids=task_ids, seed=plan.seed, rollout=rollout,
                on_episode=lambda _: progress.advance(bar),
            )  # fmt: skip
    finally:
        backend.close()
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1) + "\n")
    print(format_probe(result))


def main(argv: list[str]) -> int:
    """`intraskill train compliance-probe ARGS` (dispatched by services/trainer/cli.py)."""
    try:
        cli(args=argv, prog_name="intraskill train compliance-probe")
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    return 0
