"""`intraskill train ...`: the GRPO trainer, its loss contract check, and the warm start.

    intraskill train run --config configs/paper.toml --policy simulated --out runs/paper-sim
    intraskill train run --config configs/cpu.toml --out runs/cpu \\
        --registry-url http://127.0.0.1:8000 --evaluator-url http://127.0.0.1:8100 \\
        --analyst-url http://127.0.0.1:8200
    intraskill train loss-check tests/fixtures/trainer/grpo-loss-cases/cases.json --json
    intraskill train config --config configs/cpu.toml     # the resolved config with help text
    intraskill train warm-start ...                        # SFT warm start (warm_start/)
    intraskill train compliance-probe --model DIR          # does the policy read its skill block?

Service tokens come from the environment: TRAINER_REGISTRY_TOKEN, TRAINER_EVALUATOR_TOKEN and
TRAINER_ANALYST_TOKEN (each a token with the trainer role that service admits; required for a
service given by URL), and TRAINER_VLLM_API_KEY (the rollout servers' --api-key). With no URLs,
`run` starts what it needs on loopback, with tokens of its own (see docs/trainer.md).
TRAINER_METRICS_PORT serves Prometheus figures, TRAINER_JSON_LOGS=true logs JSON lines.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    name="train",
    help="GRPO training with group-consistent skill treatments and interval gates.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _group() -> None:
    """GRPO training with group-consistent skill treatments and interval gates."""


@app.command()
def run(
    config: Annotated[Path, typer.Option(help="a TOML config (configs/paper.toml, cpu.toml)")],
    out: Annotated[Path, typer.Option(help="run folder: metrics.jsonl, run.json, checkpoints")],
    policy: Annotated[
        str | None,
        typer.Option(help="model | simulated | procedural (the last two are test doubles)"),
    ] = None,
    registry_url: Annotated[
        str | None, typer.Option(help="registry base URL; none: an embedded one on loopback")
    ] = None,
    evaluator_url: Annotated[
        str | None, typer.Option(help="evaluator base URL; none: a local one on loopback")
    ] = None,
    analyst_url: Annotated[
        str | None, typer.Option(help="analyst base URL; none: a local one on loopback")
    ] = None,
    rounds: Annotated[int | None, typer.Option(min=1, help="override the config's rounds")] = None,
    initial_bank: Annotated[
        str | None,
        typer.Option(help="S_0: a frozen bank id or an alias (default: the gate alias)"),
    ] = None,
    seed: Annotated[int | None, typer.Option(help="override the config's seed")] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            envvar="TRAINER_METRICS_PORT",
            min=1,
            max=65535,
            help="serve Prometheus /metrics (step time, episodes, reward, gates) on this port",
        ),
    ] = None,
    wait_for_services: Annotated[
        float,
        typer.Option(
            envvar="TRAINER_WAIT_FOR_SERVICES",
            min=0,
            help="seconds to wait for the services given by URL, the rollout servers and S_0 "
            "(a cluster starts them all at once); 0: fail at once",
        ),
    ] = 0.0,
    json_logs: Annotated[
        bool,
        typer.Option(
            "--json-logs/--no-json-logs",
            envvar="TRAINER_JSON_LOGS",
            help="log one JSON object per line (time, level, logger, message) for collectors",
        ),
    ] = False,
) -> None:
    """Train: rounds of rollout steps, each interval ending with a checkpoint and a gate.

    Rerunning the same command resumes from the last checkpoint in OUT.
    """
    from services.trainer.config import ConfigError, TrainerConfig
    from services.trainer.exporter import serve_run_metrics
    from services.trainer.logs import logger, use_json_logs
    from services.trainer.orchestrator import RunError, ServiceUrls, train

    console = use_json_logs() if json_logs else None

    def fail(error: Exception, code: int) -> typer.Exit:
        if console is not None:
            logger.error(f"intraskill train run: {error}")
        else:
            print(f"intraskill train run: {error}", file=sys.stderr)
        return typer.Exit(code)

    try:
        settings = TrainerConfig.from_toml(config, policy=policy, rounds=rounds, seed=seed)
    except (ConfigError, OSError) as error:
        raise fail(error, 2) from None
    if metrics_port is not None:
        serve_run_metrics(out, metrics_port)
    urls = ServiceUrls(
        registry=registry_url, evaluator=evaluator_url, analyst=analyst_url,
        wait_s=wait_for_services,
    )  # fmt: skip
    try:
        train(
            settings, out, urls=urls, initial_bank=initial_bank, config_path=config,
            console=console,
        )  # fmt: skip
    except RunError as error:
        raise fail(error, 1) from None


@app.command("loss-check")
def loss_check(
    file: Annotated[
        Path,
        typer.Argument(
            help='a JSON case (clip_low, clip_high, aggregation, samples) or {"cases": [...]}'
        ),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="one JSON line per case")] = False,
) -> None:
    """Loss, clip fraction and dLoss/dlogprobs of each case, by the trainer's own loss function."""
    from services.trainer.loss import check_cases

    try:
        results = check_cases(json.loads(file.read_text()))
    except (OSError, ValueError, KeyError, TypeError) as error:
        print(f"intraskill train loss-check: {error}", file=sys.stderr)
        raise typer.Exit(1) from None
    for result in results:
        if as_json:
            print(json.dumps(result))
            continue
        name = f"{result['name']}: " if "name" in result else ""
        print(f"{name}loss {result['loss']:.10g}  clip_fraction {result['clip_fraction']:.6g}")
        for index, grad in enumerate(result["grad_logprobs"]):
            print(f"  sample {index}: dLoss/dlogprobs {grad}")


@app.command("config")
def show_config(
    config: Annotated[Path | None, typer.Option(help="a TOML config; none: the defaults")] = None,
) -> None:
    """Print the resolved config as JSON, then every field's help text."""
    from services.trainer.config import ConfigError, TrainerConfig, config_help

    try:
        settings = TrainerConfig.from_toml(config) if config else TrainerConfig()
    except (ConfigError, OSError) as error:
        print(f"intraskill train config: {error}", file=sys.stderr)
        raise typer.Exit(2) from None
    print(json.dumps(settings.as_dict(), indent=1))
    print(config_help())


@app.command(
    "warm-start",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def warm_start(context: typer.Context) -> None:
    """SFT warm start on heuristic-agent trajectories (`services/trainer/warm_start/`)."""
    try:
        from services.trainer.warm_start import main as warm_start_main
    except ImportError as error:  # the module, or its main(argv), is not there yet
        if error.name not in (None, "services.trainer.warm_start"):
            raise
        print(f"intraskill train warm-start: not built yet ({error})", file=sys.stderr)
        raise typer.Exit(2) from None
    raise typer.Exit(int(warm_start_main(list(context.args)) or 0))


@app.command(
    "compliance-probe",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def compliance_probe(context: typer.Context) -> None:
    """Does the policy read its skill block? Hints followed with vs without it (probe)."""
    from services.trainer.compliance_probe import main as probe_main

    raise typer.Exit(int(probe_main(list(context.args)) or 0))


def main(argv: list[str]) -> int:
    """Entry point for `intraskill train`: typer reports usage errors and sets the exit code."""
    try:
        app(args=argv, prog_name="intraskill train")
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    return 0
