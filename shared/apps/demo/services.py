"""The three services the demo runs beside the trainer: registry, evaluator, analyst.

Each is a real process on a free loopback port (`processes.py`); the demo waits on its
`/readyz` before going on. Tokens (one per registry role) are minted once per run folder and
kept there (mode 0600), so a resumed demo talks to the same registry with the same grants; the
evaluator and the analyst admit the same grants (as in deploy/), and each caller sends the
token of its role: the trainer its trainer token everywhere, the analyst its own to the
evaluator (Gate A), the demo the operator's (cold start, test evaluation).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from shared.kit.processes import (
    ServiceProcess,
    free_port,
    mint_tokens,
    start_registry,
    start_service,
)

# The policy backend each demo policy runs under in the evaluator and the analyst.
BACKENDS = {"model": "transformers", "procedural": "procedural", "simulated": "simulated"}


@dataclass
class Services:
    registry: ServiceProcess
    evaluator: ServiceProcess
    analyst: ServiceProcess
    tokens: dict[str, str]
    started: list[ServiceProcess] = field(default_factory=list)

    def trainer_env(self) -> dict[str, str]:
        """The trainer's tokens for the three services (one trainer token: one grant list)."""
        token = self.tokens["trainer"]
        return {
            "TRAINER_REGISTRY_TOKEN": token,
            "TRAINER_EVALUATOR_TOKEN": token,
            "TRAINER_ANALYST_TOKEN": token,
        }

    def stop(self) -> None:
        """Stop in reverse order of start: clients of the registry first, the registry last."""
        for service in reversed(self.started):
            service.stop()


def demo_marker(run_dir: Path) -> dict[str, str]:
    """An environment variable every child of a demo carries: finds stragglers by run folder."""
    return {"INTRASKILL_DEMO_RUN": str(run_dir.resolve())}


def run_tokens(run_dir: Path) -> tuple[dict[str, str], list[dict[str, str]]]:
    """This run folder's tokens and grants, minted on first use."""
    path = run_dir / "tokens.json"
    if path.exists():
        saved = json.loads(path.read_text())
        return saved["tokens"], saved["grants"]
    tokens, grants = mint_tokens("demo")
    path.write_text(json.dumps({"tokens": tokens, "grants": grants}))
    path.chmod(0o600)
    return tokens, grants


def start_services(
    run_dir: Path,
    *,
    database_url: str | None,
    policy: str,
    env_preset: str,
    decoding: str,
    max_turns: int | None,
    on_start=None,
) -> Services:
    """Start registry, evaluator and analyst; each is ready (answers /readyz) when this returns."""
    tokens, grants = run_tokens(run_dir)
    logs = run_dir / "logs"
    marker = demo_marker(run_dir)
    started: list[ServiceProcess] = []
    try:
        database = database_url or f"sqlite:///{(run_dir / 'registry.sqlite').resolve()}"
        registry = _ready(
            start_registry(
                database_url=database, grants=grants, log=logs / "registry.log", extra_env=marker
            ),
            started,
            on_start,
        )
        shared_env = {
            "BACKEND": BACKENDS[policy],
            "ENV_PRESET": env_preset,
            "DECODING": decoding,
            **({"MAX_TURNS": str(max_turns)} if max_turns else {}),
        }
        evaluator_env = {
            **marker,
            "EVALUATOR_REGISTRY_URL": registry.url,
            "EVALUATOR_REGISTRY_TOKEN": tokens["evaluator"],
            "EVALUATOR_TOKENS": json.dumps(grants),
            "EVALUATOR_JOBS_DIR": str((run_dir / "evaluator").resolve()),
            **{f"EVALUATOR_{k}": v for k, v in shared_env.items()},
        }
        evaluator = _ready(_serve("evaluator", ["gate"], evaluator_env, logs), started, on_start)
        analyst_env = {
            **marker,
            "ANALYST_REGISTRY_URL": registry.url,
            "ANALYST_REGISTRY_TOKEN": tokens["analyst"],
            "ANALYST_EVALUATOR_URL": evaluator.url,
            "ANALYST_EVALUATOR_TOKEN": tokens["analyst"],
            "ANALYST_TOKENS": json.dumps(grants),
            "ANALYST_DATA_DIR": str((run_dir / "analyst").resolve()),
            # the policy backend travels in each job's request, not in the analyst's settings
            **{f"ANALYST_{k}": v for k, v in shared_env.items() if k != "BACKEND"},
        }
        analyst = _ready(_serve("analyst", ["analyst"], analyst_env, logs), started, on_start)
    except BaseException:
        for service in reversed(started):
            service.stop()
        raise
    return Services(registry, evaluator, analyst, tokens, started)


def _serve(name: str, command: list[str], env: dict[str, str], logs: Path) -> ServiceProcess:
    """`intraskill COMMAND serve` on a free loopback port, logging to `logs/NAME.log`."""
    port = free_port()
    args = [*command, "serve", "--host", "127.0.0.1", "--port", str(port)]
    return start_service(name, args, port=port, env=env, log=logs / f"{name}.log")


def _ready(service: ServiceProcess, started: list[ServiceProcess], on_start) -> ServiceProcess:
    started.append(service)
    if on_start is not None:
        on_start(service.name)
    service.wait_ready(timeout=300)
    return service
