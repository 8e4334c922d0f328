"""`intraskill train warm-start`: the command line over `build.warm_start`."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from services.trainer.warm_start.build import warm_start
from services.trainer.warm_start.plan import (
    WarmStartPlan,
)

cli = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@cli.command()
def command(
    config: Annotated[
        Path, typer.Option(help="a trainer TOML config; its [warm_start] section sizes the SFT")
    ] = Path("configs/cpu.toml"),
    as_json: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
    force: Annotated[bool, typer.Option(help="train again even if cached")] = False,
    model: Annotated[str | None, typer.Option(help="override the config's base model")] = None,
    env_preset: Annotated[str | None, typer.Option(help="override the ShopSim preset")] = None,
    episodes: Annotated[int | None, typer.Option(help="override warm_start.episodes")] = None,
    epochs: Annotated[float | None, typer.Option(help="override warm_start.epochs")] = None,
    eval_tasks: Annotated[int | None, typer.Option(help="validation tasks before/after")] = None,
    reading_hints: Annotated[
        float | None, typer.Option(help="override warm_start.reading_hints (0: plain)")
    ] = None,
    cache_dir: Annotated[Path | None, typer.Option(help="override warm_start.cache_dir")] = None,
    threads: Annotated[int | None, typer.Option(help="torch CPU threads")] = None,
    model_cache: Annotated[Path | None, typer.Option(envvar="INTRASKILL_MODEL_CACHE")] = None,
) -> None:
    """SFT warm start on heuristic-agent trajectories, cached by fingerprint; prints the summary."""
    from services.trainer.config import ConfigError, TrainerConfig

    try:
        settings = TrainerConfig.from_toml(config)
        plan = WarmStartPlan.from_trainer_config(
            settings,
            model=model,
            env_preset=env_preset,
            episodes=episodes,
            epochs=epochs,
            eval_tasks=eval_tasks,
            reading_hints=reading_hints,
            cache_dir=str(cache_dir) if cache_dir else None,
        )
    except (ConfigError, OSError, TypeError) as error:
        print(f"intraskill train warm-start: {error}", file=sys.stderr)
        raise typer.Exit(2) from None
    if threads:
        import torch

        torch.set_num_threads(threads)
    try:
        # TRL's trainer prints its log lines to stdout: with --json they go to stderr, so that
        # stdout is the one JSON document a caller parses
        with contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext():
            result = warm_start(plan, model_cache=model_cache, force=force)
    except ValueError as error:
        print(f"intraskill train warm-start: {error}", file=sys.stderr)
        raise typer.Exit(1) from None
    summary = {**result.summary, "cached": result.cached, "path": str(result.path.resolve())}
    if as_json:
        print(json.dumps(summary))
        return
    print(format_summary(summary))


def format_summary(summary: Mapping[str, Any]) -> str:
    before, after = summary["val_before"], summary["val_after"]
    training = summary["training"]
    lines = [
        f"warm start {summary['checkpoint_id']}  ({'cached' if summary['cached'] else 'trained'})",
        f"  weights   {summary['path']}",
        f"  SFT       {training['examples']} examples, {training['optimizer_steps']} steps, "
        f"{training['train_seconds']} s ({training['tokens_per_second']} tokens/s)",
        f"  val       {before['episodes']} tasks   valid actions {before['valid_action_rate']:.1%}"
        f" -> {after['valid_action_rate']:.1%}   success {before['success_rate']:.1%} -> "
        f"{after['success_rate']:.1%}",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """`intraskill train warm-start ARGS` (dispatched by services/trainer/cli.py)."""
    try:
        cli(args=argv, prog_name="intraskill train warm-start")
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    return 0
