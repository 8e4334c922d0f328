"""The trainer's run: rounds of GRPO rollout steps, each interval closed by a checkpoint and a gate.

Variant: GRPO with group-consistent skill treatments (the method's fast loop), the dynamic
filter, and the interval schedule of the reference (`run_full_train.sh`). Per round t:

1. pin the frozen bank S_t (id), verify it is frozen and its hash, build the curriculum state
   (q, rho per chunk from the gate's coefficients, seed) and its fingerprint;
2. run `steps_per_round` rollout steps (waves, filter, 2 updates each), one metrics line each;
3. assert S_t did not change, save the checkpoint (HF safetensors) and register it;
4. record the round's all-wrong groups in the registry (evidence) and submit them to the
   analyst, idempotently; ask the analyst to compile the round's candidates;
5. ask the evaluator for the gate on the frozen checkpoint with S_t and the candidates; adopt
   S_{t+1} only when the gate completes, else keep S_t.

Departures from the reference: a wave's groups are judged in group order once the whole wave
has finished (slime judges them as they finish); all-wrong groups reach the registry and the
analyst at the round's end, once the checkpoint they name exists (evidence rows reference a
registered checkpoint).

Resume: `state.json` is written after every phase of a round's end; rerunning the same command
reloads the last checkpoint's weights and optimizer, rewinds `metrics.jsonl` to it, and redoes
the steps after it with the same tasks, group indices and treatments. Writes to other services
carry idempotency keys (or are looked up in `run.json` first), so nothing is submitted twice.

Each phase has its module: `service_lifecycle` (services and clients), `bank_resolution`
(S_0, pinning, curriculum), `policy_loading` (weights, optimizer, rollout source), `round_loop`
(the steps), `checkpoints`, `evidence`, `candidate_compile`, `gate_round`; `run_context` holds
the run folder's files (`RunState`: state.json). This module sequences them: a phase records
its work and returns; only `Run.execute` moves the state to the next phase (`hand_over`).

One CPU: `intraskill train run --config configs/cpu.toml --out runs/cpu`. GPU pool: set
`device = "cuda"` and see docs/trainer.md for `accelerate launch` and vLLM rollout servers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console

from services.trainer.bank_resolution import resolve_initial_bank
from services.trainer.candidate_compile import compile_round
from services.trainer.config import TrainerConfig
from services.trainer.distributed import announce, fsdp_launch, launch_problem, start_ranks
from services.trainer.gate_round import gate_round, keep_bank_without_gate
from services.trainer.local_stack import local_stack
from services.trainer.metrics import MetricsLog
from services.trainer.policy_loading import follow_the_leader, load_policy, policy_config
from services.trainer.rollout_step import TaskOrder
from services.trainer.round_loop import train_round
from services.trainer.run_context import (
    METRICS_FILE,
    RunContext,
    RunError,
    RunRecord,
    RunState,
    unavailable,
)
from services.trainer.service_lifecycle import ServiceUrls, start_services
from services.trainer.validation_tasks import (
    confirmation_task_ids,
    val_task_ids,
    validation_slices,
)
from shared.contracts.registry_api.client import RegistryClient, RegistryError, Unavailable
from shared.kit.loopback import ServiceFailed

__all__ = ["Run", "RunError", "ServiceUrls", "train"]


class Run:
    """One training run in one folder: its services, then its rounds' phases in order."""

    def __init__(
        self,
        config: TrainerConfig,
        out: Path,
        *,
        urls: ServiceUrls,
        initial_bank: str | None,
        console: Console | None = None,
    ) -> None:
        out = out.resolve()
        out.mkdir(parents=True, exist_ok=True)
        self.urls, self.initial_bank = urls, initial_bank
        self.stack = local_stack(out)
        self.metrics = MetricsLog(out / METRICS_FILE)
        self.context = RunContext(
            config=config,
            out=out,
            record=RunRecord(out, config),
            console=console or Console(stderr=True),
        )

    def start_services(self) -> None:
        clients = start_services(
            self.context.config, self.urls, self.stack, say=self.context.console.print
        )
        self.context.clients = clients
        self.context.record.data["services"] = {
            **clients.urls,
            "local": sorted(service.name for service in self.stack.started),
        }

    def close(self) -> None:
        if self.context.clients is not None:
            self.context.clients.close()
        self.metrics.close()
        self.stack.stop()

    def execute(self) -> dict[str, Any]:
        context, config = self.context, self.context.config
        state = context.load_state()
        if state is None:
            state = self.fresh_state()
            context.save_state(state)
            self.record_validation()
        else:
            context.console.print(
                f"[bold]resuming[/] {context.run_id}: round {state.round} "
                f"({state.phase}), step {state.step}"
            )
        self.metrics.rewind(state.metrics_lines)
        policy, source = load_policy(context, state)
        tasks = TaskOrder(tuple(source.train_task_ids()), config.seed)
        while state.round < config.rounds:
            if state.phase == "train":
                train_round(context, state, policy, source, tasks, self.metrics)
                self.hand_over(state, phase="compile")
            if state.phase == "compile" and not config.skill_loop:  # the ablation: no gate
                next_bank = keep_bank_without_gate(
                    context, state, reason="skill loop off (ablation)"
                )
                self.hand_over(state, round=state.round + 1, phase="train", bank_id=next_bank)
            if state.phase == "compile":
                compile_round(context, state)
                self.hand_over(state, phase="gate")
            if state.phase == "gate":
                next_bank = gate_round(context, state)
                self.hand_over(state, round=state.round + 1, phase="train", bank_id=next_bank)
        context.record.data["finished"] = True
        context.record.save()
        return context.record.data

    def record_validation(self) -> None:
        """The validation design in run.json: policy, pool and the held-out confirmation tasks."""
        config, record = self.context.config, self.context.record
        slices = validation_slices(config)
        record.data["validation"] = {
            "val_policy": config.gate.val_policy,
            "pool": config.validation_pool,
            # [start, stop) of the validation split: Gate A, the rotated gates, confirmation
            "slices": {name: [span.start, span.stop] for name, span in vars(slices).items()},
            "confirmation_task_ids": confirmation_task_ids(config, val_task_ids(config))
            if config.gate.confirm_tasks
            else [],
        }
        record.save()

    def hand_over(self, state: RunState, **moves: Any) -> None:
        """The one place a phase hands over to the next: `moves` (phase, round, bank) applied
        and state.json rewritten, after the phase saved its record, so a restart resumes at
        the next phase with the round's record complete."""
        for field, value in moves.items():
            setattr(state, field, value)
        self.context.save_state(state)

    def fresh_state(self) -> RunState:
        return RunState(bank_id=self.initial_bank_id())

    def initial_bank_id(self) -> int:
        name = self.initial_bank or self.context.config.gate.alias
        if self.urls.registry is not None:
            return resolve_initial_bank(
                self.context, name, local_operator=None, wait_s=self.urls.wait_s
            )
        # our own registry: the operator token may seed a stand-in S_0
        operator = RegistryClient(self.stack.urls()["registry"], self.stack.tokens()["operator"])
        try:
            return resolve_initial_bank(self.context, name, local_operator=operator)
        finally:
            operator.close()


def train(
    config: TrainerConfig,
    out: Path,
    *,
    urls: ServiceUrls = ServiceUrls(),
    initial_bank: str | None = None,
    config_path: Path | None = None,
    console: Any = None,
) -> dict[str, Any]:
    """Run (or resume) training in `out`; returns the run record (also in `out/run.json`).
    `console` (default: rich on stderr) is where the run's lines go (`logs.LogConsole`: JSON).

    Under a launcher, global rank 0 runs everything below; every other rank only joins the
    policy's collectives (load, updates, saves) and returns an empty record."""
    # followers wait for the leader's next call on the launcher's store (no time limit); the
    # timeout bounds each collective, where a rank that never joins is a fault
    ranks = start_ranks(policy_config(config).device, wait_s=config.collective_timeout_s)
    problem = launch_problem(  # every rank refuses alike, before any work
        ranks=ranks.num_processes,
        sharded=fsdp_launch(),
        in_process_rollouts=policy_config(config).policy == "model"
        and not config.rollout_servers.urls,
        warm_start=config.warm_start.enabled and config.policy == "model",
    )
    if problem is not None:
        raise RunError(problem)
    if not ranks.is_main_process:
        follow_the_leader()
        return {}
    try:
        return _lead(config, out, urls, initial_bank, config_path, ranks.num_processes, console)
    finally:
        announce("stop")  # the followers end with the leader, whatever ended it


def _lead(
    config: TrainerConfig,
    out: Path,
    urls: ServiceUrls,
    initial_bank: str | None,
    config_path: Path | None,
    world_size: int,
    console: Any = None,
) -> dict[str, Any]:
    lock = _lock_folder(out)
    run = Run(config, out, urls=urls, initial_bank=initial_bank, console=console)
    record = run.context.record.data
    previous = record.get("config")
    if previous is not None and previous != json.loads(json.dumps(config.as_dict())):
        raise RunError(f"{out} holds a run with another config; use a new --out folder")
    if config_path is not None:
        record["config_path"] = str(config_path)
    record["world_size"] = world_size  # of the latest start: a resume may use another count
    try:
        run.start_services()
        return run.execute()
    except ServiceFailed as error:  # a local service did not start
        raise RunError(str(error)) from None
    except Unavailable as error:
        raise unavailable(
            "registry", run.urls.registry or "local", error, "intraskill registry serve"
        ) from None
    except RegistryError as error:
        raise RunError(f"the registry refused a request: {error}") from None
    finally:
        run.close()
        lock.close()


def _lock_folder(out: Path):
    """Hold an exclusive lock on the run folder: two trainers on one folder would corrupt it.
    The kernel drops the lock when the process dies, so a `kill -9` never leaves it stale."""
    import fcntl

    out.mkdir(parents=True, exist_ok=True)
    handle = (out / ".lock").open("w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise RunError(f"another trainer is running in {out}") from None
    return handle
