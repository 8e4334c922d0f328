"""The three services the demo runs beside the trainer: registry, evaluator, analyst.

They are a `LoopbackStack` (`shared/kit/loopback.py`) on the run folder: real processes on free
loopback ports, each waited on until ready, with tokens minted once per run folder, so a
resumed demo talks to the same registry with the same grants. Each caller sends the token of
its role: the trainer its trainer token everywhere, the analyst its own to the evaluator
(Gate A), the demo the operator's (cold start, test evaluation).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from shared.kit.loopback import POLICY_BACKENDS, LoopbackStack, ServiceProcess


class Services:
    """The demo's started stack: each service, the tokens, and the trainer's environment."""

    def __init__(self, stack: LoopbackStack) -> None:
        self.stack = stack
        self.registry, self.evaluator, self.analyst = stack.started
        self.tokens = stack.tokens()

    @property
    def started(self) -> list[ServiceProcess]:
        return self.stack.started

    def trainer_env(self) -> dict[str, str]:
        """The trainer's tokens for the three services (one trainer token: one grant list)."""
        token = self.tokens["trainer"]
        return {
            "TRAINER_REGISTRY_TOKEN": token,
            "TRAINER_EVALUATOR_TOKEN": token,
            "TRAINER_ANALYST_TOKEN": token,
        }

    def stop(self) -> None:
        self.stack.stop()


def demo_marker(run_dir: Path) -> dict[str, str]:
    """An environment variable every child of a demo carries: finds stragglers by run folder."""
    return {"INTRASKILL_DEMO_RUN": str(run_dir.resolve())}


def start_services(
    run_dir: Path,
    *,
    database_url: str | None,
    policy: str,
    env_preset: str,
    decoding: str,
    max_turns: int | None,
    on_start: Callable[[str], object] | None = None,
) -> Services:
    """Start registry, evaluator and analyst; each is ready (answers /readyz) when this returns."""
    stack = LoopbackStack(
        run_dir, run_dir / "logs", prefix="demo", env=demo_marker(run_dir), on_start=on_start
    )
    shared = {
        "ENV_PRESET": env_preset,
        "DECODING": decoding,
        **({"MAX_TURNS": str(max_turns)} if max_turns else {}),
    }
    try:
        registry = stack.start_registry(database_url).url
        evaluator_settings = {"BACKEND": POLICY_BACKENDS[policy], **shared}
        evaluator = stack.start_evaluator(
            registry, {f"EVALUATOR_{k}": v for k, v in evaluator_settings.items()}
        ).url
        # the policy backend travels in each job's request, not in the analyst's settings
        stack.start_analyst(registry, evaluator, {f"ANALYST_{k}": v for k, v in shared.items()})
    except BaseException:
        stack.stop()
        raise
    return Services(stack)
