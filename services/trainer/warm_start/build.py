"""The whole warm start: teacher, fingerprint, cache lookup, SFT, before/after, publish."""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.trainer.warm_start.demonstrations import (
    demonstration_shapes,
    demonstrations,
    fingerprint,
    sft_examples,
)
from services.trainer.warm_start.evaluation import evaluate_policy, policy_rates
from services.trainer.warm_start.plan import (
    SUMMARY_FILE,
    TEACHER_ID,
    WARM_START_SCHEMA,
    WarmStartPlan,
)
from services.trainer.warm_start.sft import run_sft
from services.trainer.warm_start.teacher import teacher_trajectories
from shared.runtime.agent.chat import ChatRenderer
from shared.runtime.shopsim.env import ShopEnv


@dataclass
class WarmStartResult:
    path: Path
    fingerprint: str
    cached: bool
    summary: dict[str, Any] = field(default_factory=dict)


def warm_start(
    plan: WarmStartPlan,
    *,
    model_cache: str | Path | None = None,
    force: bool = False,
    show_progress: bool = True,
) -> WarmStartResult:
    """The warm-started model folder for `plan`, trained now or taken from the cache."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
    from transformers import AutoTokenizer

    from shared.runtime.agent.models import (
        DEFAULT_CACHE,
        IDENTITY_FILE,
        model_identity,
        resolve_model,
    )

    base_dir = resolve_model(plan.model, model_cache or DEFAULT_CACHE)
    base = model_identity(base_dir)
    env = ShopEnv.from_preset(plan.env_preset)
    renderer = ChatRenderer(AutoTokenizer.from_pretrained(base_dir, local_files_only=True))
    started = time.perf_counter()

    console = _stderr_console()
    # Bars redraw on a terminal; in a log (the demo, CI) one line per finished phase instead.
    note = console.log if show_progress and not console.is_terminal else (lambda *_: None)
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        disable=not show_progress,
        transient=False,
        console=console,
    ) as progress:
        teacher = progress.add_task("teacher trajectories", total=len(env.task_ids("train")))
        trajectories = teacher_trajectories(
            env, renderer, plan, on_trajectory=lambda _: progress.advance(teacher)
        )
        examples = sft_examples(trajectories, plan.episodes)
        note(f"warm start: teacher trajectories {policy_rates(trajectories)}")
        key = fingerprint(plan, examples, base["checkpoint_id"])
        target = Path(plan.cache_dir) / f"warm-{key[:16]}"
        if (target / SUMMARY_FILE).exists() and not force:
            summary = json.loads((target / SUMMARY_FILE).read_text())
            return WarmStartResult(target, key, True, summary)

        work_dir = Path(plan.cache_dir) / f".work-{key[:16]}"
        build_dir = work_dir / "model"
        before = progress.add_task("base model on val", total=plan.eval_tasks)
        rates_before = evaluate_policy(base_dir, env, plan, lambda: progress.advance(before))
        note(f"warm start: base model on val {rates_before}")
        sft = progress.add_task("SFT", total=None)
        training = run_sft(
            base_dir,
            examples,
            plan,
            work_dir,
            build_dir,
            lambda **fields: progress.update(sft, **fields),
        )
        note(f"warm start: SFT {training['optimizer_steps']} steps, {training['train_seconds']} s")
        identity = {
            "model_id": base["model_id"],
            "checkpoint_id": f"warm-start-{key[:16]}",
            "source": f"SFT warm start of {base['checkpoint_id']} on {len(examples)} "
            f"heuristic-agent trajectories"
            + (f", {plan.reading_hints:.0%} with a reading hint" if plan.reading_hints else "")
            + " (services/trainer/warm_start/)",
        }
        (build_dir / IDENTITY_FILE).write_text(json.dumps(identity, indent=2) + "\n")
        after = progress.add_task("warm start on val", total=plan.eval_tasks)
        rates_after = evaluate_policy(build_dir, env, plan, lambda: progress.advance(after))
        note(f"warm start: warm-started model on val {rates_after}")

    teacher_rates = policy_rates(trajectories)
    summary = {
        "schema": WARM_START_SCHEMA,
        "fingerprint": key,
        "path": str(target),
        "base": base,
        "checkpoint_id": identity["checkpoint_id"],
        "plan": {**plan.training_settings(), "eval_tasks": plan.eval_tasks},
        "teacher": {
            "agent": TEACHER_ID,
            "train_tasks": len(trajectories),
            "success_rate": teacher_rates["success_rate"],
            "episodes_used": plan.episodes,
            "demonstrations": demonstration_shapes(demonstrations(trajectories, plan.episodes)),
        },
        "training": training,
        "val_before": rates_before,
        "val_after": rates_after,
        "seconds": round(time.perf_counter() - started, 1),
    }
    (build_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    _publish(build_dir, target)
    shutil.rmtree(work_dir, ignore_errors=True)
    return WarmStartResult(target, key, False, summary)


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


def _publish(build_dir: Path, target: Path) -> None:
    """Move the finished folder into place; a concurrent run that published first wins."""
    if target.exists():
        shutil.rmtree(build_dir, ignore_errors=True)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    build_dir.rename(target)
