"""Warm start: a short SFT on heuristic-agent trajectories, so GRPO starts from a policy that acts.

Out of the box SmolLM2-135M-Instruct cannot shop (a handful of valid actions in dozens of turns,
success 0), and GRPO learns nothing from groups whose eight siblings all score 0. The paper's base
model already acts validly (51.75 % success); this gives the CPU preset a base that does too.

How:

1. **Teacher trajectories.** ShopSim's `HeuristicAgent` plays train tasks through the agent
   runtime's own `RolloutEngine`, behind `HeuristicTeacherBackend`: a scripted policy backend
   (not a model) that answers each turn with the heuristic's action, tokenized by the policy's
   own chat renderer. So every example is exactly what the runtime would record for the policy:
   the same prompt layout (instructions, persona, observations as user turns), the same token
   ids, and a loss mask that is 1 exactly on the tokens the policy must generate (the action and
   its end-of-turn token). Only successful episodes are kept (rejection sampling).
2. **SFT** with TRL's `SFTTrainer` on the pre-tokenized examples: `assistant_masks` = the
   runtime's loss mask, so prompts and observations carry no loss.
3. **Cache.** The result is saved (HF format, safetensors) under a folder named by a fingerprint
   of the settings, the exact training tokens and the base model's checkpoint id; a second call
   returns it at once. An interrupted SFT resumes from its last TRL checkpoint.
4. **Before/after.** Valid-action rate (turns whose reply was one well-formed action that the
   shop accepted) and success rate on validation tasks, base vs warm-started, with the trainer's
   decoding, prompt and step cap; written to `warm_start.json` beside the weights.

    intraskill train warm-start --config configs/cpu.toml --json
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from shared.contracts.hashing import content_hash
from shared.runtime.agent.backends.base import (
    TurnFailure,
    TurnOutput,
    TurnRequest,
    token_level_output,
)
from shared.runtime.agent.chat import ChatRenderer
from shared.runtime.agent.decoding import DecodingConfig
from shared.runtime.agent.trajectory import Trajectory
from shared.runtime.shopsim.agents import HeuristicAgent
from shared.runtime.shopsim.env import ShopEnv
from shared.runtime.shopsim.types import Episode, StepResult

WARM_START_SCHEMA = "intraskill-warm-start-v1"
SUMMARY_FILE = "warm_start.json"
TEACHER_ID = "shopsim-heuristic-agent"


@dataclass(frozen=True)
class WarmStartPlan:
    """Everything a warm start depends on, resolved from the trainer config (and nothing else)."""

    model: str
    """'smollm2', 'tiny' or a model folder: the base the SFT starts from."""
    env_preset: str
    prompt_version: str
    decoding: DecodingConfig
    max_turns: int | None
    episodes: int
    """Successful teacher trajectories wanted (train split, in task order)."""
    epochs: float
    lr: float
    batch_size: int
    """Examples per optimizer step (micro-batches of one, accumulated)."""
    max_length: int
    seed: int
    eval_tasks: int
    """Validation tasks for the before/after rates (first N of the split, one episode each)."""
    cache_dir: str
    dtype: str = "float32"
    device: str = "cpu"
    reading_hints: float = 0.0
    """Share of teacher episodes with one reading hint in the skill block, acted out (0: none)."""

    @classmethod
    def from_trainer_config(cls, config: Any, **overrides: Any) -> WarmStartPlan:
        """The plan of a `TrainerConfig`: its layout, decoding and step cap, its SFT section."""
        from shared.runtime.agent.decoding import CPU_DECODING, PAPER_DECODING
        from shared.runtime.agent.prompts import DEFAULT_LAYOUT

        section = config.warm_start
        values = {
            "model": config.model,
            "env_preset": config.env_preset,
            "prompt_version": config.prompt_version or DEFAULT_LAYOUT,
            "decoding": PAPER_DECODING if config.decoding == "paper" else CPU_DECODING,
            "max_turns": config.max_turns,
            "episodes": section.episodes,
            "epochs": section.epochs,
            "lr": section.lr,
            "batch_size": section.batch_size,
            "max_length": section.max_length,
            "seed": config.seed,
            "eval_tasks": section.eval_tasks,
            "cache_dir": section.cache_dir,
            "dtype": config.dtype,
            "device": config.device,
            "reading_hints": section.reading_hints,
        }
        values.update({key: value for key, value in overrides.items() if value is not None})
        return cls(**values)

    def training_settings(self) -> dict[str, Any]:
        """The settings that change the trained weights (the fingerprint's config part)."""
        settings = asdict(self)
        for key in ("cache_dir", "eval_tasks", "device"):
            settings.pop(key)
        if not self.reading_hints:  # a plain warm start keeps the fingerprint it always had
            settings.pop("reading_hints")
        settings["decoding"] = self.decoding.to_dict()
        return settings


# -- the teacher: a scripted policy backend ----------------------------------------------------


@dataclass
class _Mirror:
    """The teacher's copy of one episode (ShopSim is deterministic: it tracks the runtime's)."""

    agent: HeuristicAgent
    episode: Episode
    result: StepResult


class HeuristicTeacherBackend:
    """A scripted policy backend, not a model: each turn it writes the heuristic agent's action.

    It plays every episode on its own copy of the environment (same task and seed; pages are a
    deterministic function of the actions) to know the page the heuristic acts on, and returns
    the action as token ids from the policy's chat renderer followed by the end-of-turn token, so
    the runtime records exactly the tokens the policy would have to generate.
    """

    name = "heuristic-teacher"
    model_id = TEACHER_ID
    checkpoint_id = TEACHER_ID

    def __init__(
        self,
        env: ShopEnv,
        renderer: ChatRenderer,
        episodes: Mapping[str, tuple[str, int]],
        styles: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self.env, self.renderer = env, renderer
        self.episodes = dict(episodes)  # episode id -> (task id, seed)
        self.styles = dict(styles or {})  # episode id -> HeuristicAgent style (a reading hint)
        self.end_of_turn = _end_of_turn_token(renderer)
        self._live: dict[str, _Mirror] = {}

    def generate(
        self, requests: Sequence[TurnRequest], decoding: DecodingConfig
    ) -> list[TurnOutput | TurnFailure]:
        return [self._turn(request) for request in requests]

    def _turn(self, request: TurnRequest) -> TurnOutput | TurnFailure:
        mirror = self._live.get(request.key)
        if mirror is None:
            task_id, seed = self.episodes[request.key]
            episode, first = self.env.reset(task_id, seed=seed)
            agent = HeuristicAgent(self.env.task_view(task_id), **self.styles.get(request.key, {}))
            mirror = self._live[request.key] = _Mirror(agent, episode, first)
        if request.prompt_ids is None:
            return TurnFailure("the teacher needs the runtime's exact prompt ids")
        action = mirror.agent.act(mirror.result)
        mirror.result = mirror.episode.step(action)
        # A turn longer than the policy may generate is cut, as a model's would be; the runtime
        # then ends the episode (generation_length) and it is not kept.
        generated = [*self.renderer.encode(action), self.end_of_turn][: request.max_new_tokens]
        return token_level_output(
            self.renderer,
            request.prompt_ids,
            generated,
            [0.0] * len(generated),
            request.max_new_tokens,
        )

    def release(self, key: str) -> None:
        self._live.pop(key, None)

    def close(self) -> None:
        self._live.clear()


def _end_of_turn_token(renderer: ChatRenderer) -> int:
    """The token the chat template writes after an assistant message (ChatML's <|im_end|>)."""
    tokenizer = renderer.tokenizer
    if "<|im_end|>" in tokenizer.get_vocab():
        return int(tokenizer.convert_tokens_to_ids("<|im_end|>"))
    if tokenizer.eos_token_id is None:
        raise ValueError("the tokenizer has neither <|im_end|> nor an eos token")
    return int(tokenizer.eos_token_id)


def teacher_trajectories(
    env: ShopEnv,
    renderer: ChatRenderer,
    plan: WarmStartPlan,
    *,
    on_trajectory: Callable[[Trajectory], None] | None = None,
) -> list[Trajectory]:
    """The heuristic agent on the train split, in task order, rendered in the policy's layout;
    with `plan.reading_hints`, that share of episodes shows one reading hint and acts it out."""
    from shared.runtime.agent.runner import RolloutConfig, RolloutEngine

    specs, styles = hinted_specs(env.task_ids("train"), plan.seed, plan.reading_hints)
    backend = HeuristicTeacherBackend(
        env, renderer, {spec.resolved_id(): (spec.task_id, spec.seed) for spec in specs}, styles
    )
    config = RolloutConfig(
        prompt_version=plan.prompt_version,
        decoding=plan.decoding,
        concurrency=64,
        max_turns=plan.max_turns,
    )
    return RolloutEngine(env, backend, config).run(specs, on_trajectory)  # type: ignore[arg-type]


def hinted_specs(
    task_ids: Sequence[str], seed: int, share: float
) -> tuple[list[Any], dict[str, Mapping[str, Any]]]:
    """One teacher episode per task; a seeded `share` of them carries one reading hint (drawn
    uniformly) in the skill block, with the style the teacher must act out under its id."""
    import random

    from services.trainer.reading_hints import HINTS
    from shared.runtime.agent.runner import EpisodeSpec

    draw = random.Random(f"{seed}:reading-hints")
    hints = list(HINTS.values())
    specs, styles = [], {}
    for task_id in task_ids:
        hinted = share > 0 and draw.random() < share
        hint = draw.choice(hints) if hinted else None
        spec = EpisodeSpec(task_id, seed, chunks=(hint.chunk(),) if hint else ())
        if hint:
            styles[spec.resolved_id()] = hint.teacher_style
        specs.append(spec)
    return specs, styles


def demonstrations(trajectories: Sequence[Trajectory], episodes: int) -> list[Trajectory]:
    """The first `episodes` successful trajectories: the ones SFT trains on."""
    return [
        trajectory
        for trajectory in trajectories
        if trajectory.scored and trajectory.components.get("r_success") == 1.0
    ][:episodes]


def demonstration_shapes(demos: Sequence[Trajectory]) -> dict[str, Any]:
    """What the demonstrations cover: turns per episode, two-axis purchases, hints shown."""
    turns = [len(demo.steps) for demo in demos]
    two_axis = sum(
        len(
            {
                step.action.split("=", 1)[0]
                for step in demo.steps
                if step.action and "=" in step.action
            }
        )
        >= 2
        for demo in demos
    )
    return {
        "episodes": len(demos),
        "turns": {str(n): turns.count(n) for n in sorted(set(turns))},
        "two_axis_purchases": two_axis,
        "skill_block": hint_counts(demos),
    }


def hint_counts(trajectories: Sequence[Trajectory]) -> dict[str, int]:
    """How many trajectories carried each injected chunk (reading hints) or none."""
    counts: dict[str, int] = {}
    for trajectory in trajectories:
        for name in trajectory.provenance.injected or ["none"]:
            counts[name] = counts.get(name, 0) + 1
    return counts


def sft_examples(trajectories: Sequence[Trajectory], episodes: int) -> list[dict[str, list[int]]]:
    """One pre-tokenized example per segment of the first `episodes` successful trajectories.

    `assistant_masks` is the runtime's loss mask: 1 exactly on the generated tokens (the action
    and its end-of-turn token), so the SFT loss falls on what the policy writes and never on the
    prompt, the persona or the pages it reads.
    """
    successful = demonstrations(trajectories, episodes)
    if len(successful) < episodes:
        raise ValueError(
            f"the heuristic agent succeeded on {len(successful)} train tasks; "
            f"{episodes} were asked for (lower warm_start.episodes or raise max_turns)"
        )
    return [
        {"input_ids": list(segment.token_ids), "assistant_masks": list(segment.loss_mask)}
        for trajectory in successful
        for segment in trajectory.segments
    ]


def fingerprint(plan: WarmStartPlan, examples: Sequence[dict[str, list[int]]], base: str) -> str:
    """Hash of the training settings, the exact training tokens and the base checkpoint id."""
    return content_hash(
        {
            "schema": WARM_START_SCHEMA,
            "settings": plan.training_settings(),
            "data": content_hash(list(examples)),
            "base": base,
        }
    )


# -- before / after ------------------------------------------------------------------------------


def policy_rates(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """Valid-action rate (turns whose action the shop accepted), success rate, mean reward."""
    turns = [step for trajectory in trajectories for step in trajectory.steps]
    valid = sum(step.action is not None and step.env_reason == "ok" for step in turns)
    episodes = len(trajectories)
    return {
        "episodes": episodes,
        "turns": len(turns),
        "valid_actions": valid,
        "valid_action_rate": valid / len(turns) if turns else 0.0,
        "success_rate": (
            sum(t.components.get("r_success", 0.0) == 1.0 for t in trajectories) / episodes
            if episodes
            else 0.0
        ),
        "reward_mean": sum(t.reward for t in trajectories) / episodes if episodes else 0.0,
        "scored_rate": sum(t.scored for t in trajectories) / episodes if episodes else 0.0,
    }


def evaluate_policy(
    model_dir: Path, env: ShopEnv, plan: WarmStartPlan, on_episode: Callable[[], None] | None = None
) -> dict[str, float]:
    """The policy's rates on the first `eval_tasks` validation tasks (one episode each)."""
    from shared.runtime.agent.backends import make_backend
    from shared.runtime.agent.runner import EpisodeSpec, RolloutConfig, RolloutEngine

    backend = make_backend("transformers", str(model_dir), dtype=plan.dtype, device=plan.device)
    try:
        specs = [EpisodeSpec(task_id, plan.seed) for task_id in env.task_ids("val")]
        specs = specs[: plan.eval_tasks]
        config = RolloutConfig(
            prompt_version=plan.prompt_version,
            decoding=plan.decoding,
            concurrency=16,
            max_turns=plan.max_turns,
        )
        trajectories = RolloutEngine(env, backend, config).run(
            specs, (lambda _: on_episode()) if on_episode else None
        )
    finally:
        backend.close()
    return policy_rates(trajectories)


# -- SFT -----------------------------------------------------------------------------------------


def build_trainer(
    base_dir: Path,
    examples: Sequence[dict[str, list[int]]],
    plan: WarmStartPlan,
    work_dir: Path,
    callbacks: Sequence[Any] = (),
) -> Any:
    """TRL's SFTTrainer on the pre-tokenized examples (labels -100 wherever the mask is 0)."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    tokenizer = AutoTokenizer.from_pretrained(base_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(
        base_dir, dtype=getattr(torch, plan.dtype), local_files_only=True
    )
    steps_per_epoch = max(1, len(examples) // plan.batch_size)
    args = SFTConfig(
        output_dir=str(work_dir),
        num_train_epochs=plan.epochs,
        # Micro-batches of one example, accumulated: no padding compute on a CPU.
        per_device_train_batch_size=1,
        gradient_accumulation_steps=plan.batch_size,
        learning_rate=plan.lr,
        lr_scheduler_type="linear",
        warmup_steps=max(1, steps_per_epoch // 10),
        weight_decay=0.0,
        max_length=plan.max_length,
        shuffle_dataset=True,
        seed=plan.seed,
        data_seed=plan.seed,
        logging_steps=1,
        save_strategy="steps",
        save_steps=max(1, steps_per_epoch // 2),
        save_total_limit=1,
        report_to=[],
        disable_tqdm=True,
        use_cpu=plan.device == "cpu",
        dataloader_num_workers=0,
    )
    return SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(list(examples)),
        processing_class=tokenizer,
        callbacks=list(callbacks),
    )


def run_sft(
    base_dir: Path,
    examples: Sequence[dict[str, list[int]]],
    plan: WarmStartPlan,
    work_dir: Path,
    out_dir: Path,
    report: Callable[..., None] | None = None,
) -> dict[str, Any]:
    """Train, resuming from `work_dir`'s last checkpoint; save the weights to `out_dir`."""
    from transformers import TrainerCallback

    history: list[dict[str, float]] = []
    show = report or (lambda **_: None)

    class _Progress(TrainerCallback):
        """Reports optimizer steps to the progress bar; keeps the loss log for the summary."""

        def on_train_begin(self, args, state, control, **kwargs):
            show(total=state.max_steps, completed=state.global_step)

        def on_step_end(self, args, state, control, **kwargs):
            show(completed=state.global_step)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                history.append({"step": state.global_step, "loss": float(logs["loss"])})
                show(description=f"SFT (loss {logs['loss']:.3f})")

    trainer = build_trainer(base_dir, examples, plan, work_dir, [_Progress()])
    resume = any(work_dir.glob("checkpoint-*"))
    started = time.perf_counter()
    output = trainer.train(resume_from_checkpoint=True if resume else None)
    seconds = time.perf_counter() - started
    trainer.save_model(str(out_dir))
    trainer.processing_class.save_pretrained(str(out_dir))
    tokens = sum(len(example["input_ids"]) for example in examples)
    return {
        "train_seconds": round(seconds, 1),
        "optimizer_steps": output.global_step,
        "examples": len(examples),
        "tokens_per_epoch": tokens,
        "loss_tokens_per_epoch": sum(sum(example["assistant_masks"]) for example in examples),
        "tokens_per_second": round(tokens * plan.epochs / seconds, 1) if seconds > 0 else None,
        "resumed": resume,
        "loss_history": history,
    }


# -- the whole warm start ------------------------------------------------------------------------


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
            + " (services/trainer/warm_start.py)",
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


# -- command line --------------------------------------------------------------------------------

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
