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

One CPU: `intraskill train run --config configs/cpu.toml --out runs/cpu`. GPU pool: set
`device = "cuda"` and see docs/trainer.md for `accelerate launch` and vLLM rollout servers.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from services.trainer.config import TrainerConfig
from services.trainer.evaluator_client import EvaluatorClient, EvaluatorError
from services.trainer.heartbeat import heartbeat
from services.trainer.local_stack import LocalStack, StackError
from services.trainer.metrics import MetricsLog, step_metrics
from services.trainer.policy import Policy
from services.trainer.step import GroupOutcome, TaskStream, rollout_step
from services.trainer.treatments import (
    CurriculumChunk,
    CurriculumState,
    rho_from_coefficients,
)
from shared.agent.advantage import training_samples
from shared.chunks import ChunkContent, InjectedChunk
from shared.evaluator_api import DESIGN_NOT_IDENTIFIED
from shared.hashing import content_hash
from shared.registry_api.client import (
    Conflict,
    NotFound,
    RegistryClient,
    RegistryError,
    Unavailable,
)
from shared.registry_api.schemas import BankPublic, EvidenceCreate, Treatment

STATE_FILE, RUN_FILE, METRICS_FILE = "state.json", "run.json", "metrics.jsonl"
MASK_SEED_ATTEMPTS = 5  # the configured seed, then the next four (see Run.submit_gate)
ENV_TOKENS = {
    "registry": "TRAINER_REGISTRY_TOKEN",
    "evaluator": "TRAINER_EVALUATOR_TOKEN",
    "analyst": "TRAINER_ANALYST_TOKEN",
}


class RunError(RuntimeError):
    """The run stopped cleanly; the message says why and what to restart."""


@dataclass(frozen=True)
class ServiceUrls:
    registry: str | None = None
    evaluator: str | None = None
    analyst: str | None = None
    analyst_standin: bool = False  # no analyst URL: start the recording STAND-IN, not the real one


def run_id_for(out: Path) -> str:
    """A registry-safe id for the run: its folder name and a digest of its absolute path (two
    folders of one name never share checkpoint ids or idempotency keys)."""
    folder = out.resolve()
    slug = re.sub(r"[^a-z0-9._-]+", "-", folder.name.lower()).strip("-._") or "run"
    return f"{slug[:32]}-{content_hash(str(folder))[:6]}"


def _write_json(path: Path, data: Any) -> None:
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(json.dumps(data, indent=1))
    with temporary.open() as handle:
        os.fsync(handle.fileno())
    temporary.replace(path)


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.is_file() else None


def _unavailable(service: str, url: str, error: Exception, restart: str) -> RunError:
    return RunError(
        f"the {service} at {url} is unreachable after retries ({error}). Restart it "
        f"({restart}) and rerun the same command: the run resumes from its last checkpoint."
    )


def curriculum_from_bank(
    bank: BankPublic, config: TrainerConfig
) -> tuple[CurriculumState, list[InjectedChunk]]:
    """The interval's curriculum: the bank's chunks in bank order with their rho.

    When every entry carries the gate coefficient that admitted it, rho must be the method's
    mapping of those coefficients (a bank whose rho disagrees is refused).
    """
    if bank.content_hash is None or bank.frozen_at is None:
        raise RunError(f"bank {bank.id} is not frozen: the trainer trains on frozen banks only")
    if abs(bank.q - config.q) > 1e-12:
        raise RunError(f"bank {bank.id} has q={bank.q}, the config q={config.q}")
    entries = sorted(bank.entries, key=lambda entry: entry.position)
    if entries and all(entry.coefficient is not None for entry in entries):
        expected = rho_from_coefficients(
            {entry.slug: entry.coefficient for entry in entries},  # type: ignore[misc]
            rho_min=config.rho_min,
            rho_max=config.rho_max,
        )
        for entry in entries:
            if abs(expected[entry.slug] - entry.rho) > 1e-9:
                raise RunError(
                    f"bank {bank.id}: {entry.slug} has rho {entry.rho}, its coefficient gives "
                    f"{expected[entry.slug]}"
                )
    chunks = tuple(
        CurriculumChunk(entry.chunk_id, entry.slug, entry.version, entry.content_hash, entry.rho)
        for entry in entries
    )
    state = CurriculumState(
        bank_id=bank.id, bank_hash=bank.content_hash, q=bank.q, seed=config.seed, chunks=chunks
    )
    injected = [
        InjectedChunk(chunk_id=e.slug, version=e.version, content=e.content) for e in entries
    ]
    return state, injected


class Run:
    """One training run in one folder."""

    def __init__(
        self,
        config: TrainerConfig,
        out: Path,
        *,
        urls: ServiceUrls,
        initial_bank: str | None,
        console: Console | None = None,
    ) -> None:
        self.config, self.out = config, out.resolve()
        self.out.mkdir(parents=True, exist_ok=True)
        self.urls, self.initial_bank = urls, initial_bank
        self.console = console or Console(stderr=True)
        self.stack = LocalStack(self.out / "services")
        self.metrics = MetricsLog(self.out / METRICS_FILE)
        self.record: dict[str, Any] = _read_json(self.out / RUN_FILE) or {
            "run_id": run_id_for(out),
            "config": json.loads(json.dumps(config.as_dict())),  # tuples as JSON lists
            "rounds": [],
        }
        self.run_id = self.record["run_id"]  # fixed at the run's first start

    # -- services ---------------------------------------------------------------------------

    def start_services(self) -> None:
        config, local = self.config, self.stack.tokens
        registry = self.urls.registry or self.stack.start_registry()
        token = os.environ.get(ENV_TOKENS["registry"]) or (
            None if self.urls.registry else local()["trainer"]
        )
        if not token:
            raise RunError(f"set {ENV_TOKENS['registry']} (a registry token, trainer role)")
        backend = {"model": "transformers", "simulated": "simulated", "procedural": "procedural"}
        evaluator = self.urls.evaluator or self.stack.start_evaluator(
            registry,
            {
                "EVALUATOR_BACKEND": backend[config.policy],
                "EVALUATOR_ENV_PRESET": config.env_preset,
                "EVALUATOR_DECODING": config.decoding,
                "EVALUATOR_DEVICE": config.device,
                "EVALUATOR_DTYPE": config.dtype,
                "EVALUATOR_BUDGET": str(config.gate.budget),
                "EVALUATOR_MASK_SEED": str(config.gate.mask_seed),
                **({"EVALUATOR_MAX_TURNS": str(config.max_turns)} if config.max_turns else {}),
            },
        )
        analyst = self.urls.analyst or self.start_local_analyst(registry, evaluator)
        retry = {"retries": config.service_retries, "backoff": 0.5, "backoff_max": 20.0}
        self.registry = RegistryClient(registry, token, **retry)
        self.evaluator = EvaluatorClient(
            evaluator, token=os.environ.get(ENV_TOKENS["evaluator"]), **retry
        )
        from shared.analyst_api.client import AnalystClient

        self.analyst = AnalystClient(analyst, token=os.environ.get(ENV_TOKENS["analyst"]), **retry)
        self.record["services"] = {
            "registry": registry,
            "evaluator": evaluator,
            "analyst": analyst,
            "local": sorted(self.stack.processes),
            "analyst_is_standin": self.urls.analyst is None and self.urls.analyst_standin,
        }

    def start_local_analyst(self, registry: str, evaluator: str) -> str:
        """The real analyst on loopback, acting as the run's policy acts (its retries and live
        tests load the frozen checkpoint through the backend the compile request names)."""
        if self.urls.analyst_standin:
            return self.stack.start_analyst_standin()
        config = self.config
        return self.stack.start_analyst(
            registry,
            evaluator,
            {
                "ANALYST_ENV_PRESET": config.env_preset,
                "ANALYST_DECODING": config.decoding,
                "ANALYST_DEVICE": config.device,
                "ANALYST_DTYPE": config.dtype,
                **({"ANALYST_MAX_TURNS": str(config.max_turns)} if config.max_turns else {}),
            },
        )

    def close(self) -> None:
        for client in ("registry", "evaluator", "analyst"):
            if hasattr(self, client):
                getattr(self, client).close()
        self.metrics.close()
        self.stack.close()

    # -- banks ------------------------------------------------------------------------------

    def resolve_initial_bank(self) -> int:
        name = self.initial_bank or self.config.gate.alias
        if name.isdigit():
            return int(name)
        try:
            return self.registry.get_alias(name).bank_id
        except NotFound:
            if self.urls.registry is None:  # our own empty registry: seed a stand-in S_0
                return self.seed_standin_bank(name)
            raise RunError(
                f"no bank behind alias {name!r}: run the cold start first or pass --initial-bank"
            ) from None

    def seed_standin_bank(self, alias: str) -> int:
        """A STAND-IN S_0 for a fresh local registry (in place of the cold start and Gate A):
        four operator chunks with hash-derived positive coefficients, frozen, aliased."""
        from shared.hashing import hash_uniform

        operator = RegistryClient(self.stack.urls["registry"], self.stack.tokens()["operator"])
        try:
            entries = []
            coefficients = {}
            for index, topic in enumerate(("query", "options", "price", "verify")):
                content = ChunkContent(
                    title=f"Stand-in chunk: {topic}",
                    applies_when=f"the task mentions its {topic} requirements",
                    procedure=[f"check the {topic} requirement", "act on the matching option"],
                    verify=f"the {topic} on the page matches the task",
                    avoid=f"guessing the {topic}",
                )
                chunk = operator.create_chunk(
                    f"standin-{topic}", content, idempotency_key=f"{self.run_id}:s0:chunk:{index}"
                )
                coefficients[chunk.latest.id] = 0.01 + 0.05 * hash_uniform(self.run_id, topic)
            rho = rho_from_coefficients(
                coefficients, rho_min=self.config.rho_min, rho_max=self.config.rho_max
            )
            entries = [
                {"chunk_version_id": vid, "rho": rho[vid], "coefficient": coefficients[vid]}
                for vid in coefficients
            ]
            bank = operator.create_bank(
                entries,
                q=self.config.q,
                note="stand-in S_0 seeded by the trainer's local stack (no cold start ran)",
                idempotency_key=f"{self.run_id}:s0:bank",
            )
            operator.freeze_bank(bank.id, idempotency_key=f"{self.run_id}:s0:freeze")
            operator.create_alias(alias, bank.id, reason="stand-in S_0 for a local run")
            return bank.id
        finally:
            operator.close()

    def pin_bank(self, bank_id: int, expected_hash: str | None) -> BankPublic:
        summary = self.registry.bank_summary(bank_id)
        if summary.status.value != "frozen":
            raise RunError(f"bank {bank_id} is {summary.status.value}, not frozen")
        bank = self.registry.get_bank(bank_id, revalidate=True)
        if expected_hash is not None and bank.content_hash != expected_hash:
            raise RunError(
                f"bank {bank_id} hash {bank.content_hash} differs from the pinned {expected_hash}"
            )
        return bank

    # -- the run ----------------------------------------------------------------------------

    def execute(self) -> dict[str, Any]:
        config = self.config
        state = _read_json(self.out / STATE_FILE)
        if state is None:
            state = {
                "round": 0,
                "phase": "train",
                "step": 0,
                "task_cursor": 0,
                "next_group_index": 0,
                "metrics_lines": 0,
                "bank_id": self.resolve_initial_bank(),
                "checkpoint_dir": None,
            }
            self.save_state(state)
        else:
            self.console.print(
                f"[bold]resuming[/] {self.run_id}: round {state['round']} ({state['phase']}), "
                f"step {state['step']}"
            )
        self.metrics.rewind(state["metrics_lines"])
        policy, source = self.load_policy(state)
        tasks = TaskStream(source.train_task_ids(), config.seed, state["task_cursor"])
        while state["round"] < config.rounds:
            if state["phase"] == "train":
                self.train_round(state, policy, source, tasks)
            if state["phase"] == "compile":
                self.compile_round(state)
            if state["phase"] == "gate":
                self.gate_round(state)
        self.record["finished"] = True
        self.save_record()
        return self.record

    def load_policy(self, state: dict[str, Any]):
        from shared.agent.decoding import CPU_DECODING, PAPER_DECODING
        from shared.agent.models import resolve_model

        config = self.config
        if config.policy != "model":  # test doubles train the tiny model: fp32, GPU if any
            import torch

            device = config.device if torch.cuda.is_available() else "cpu"
            config = config.with_(dtype="float32", device=device)
        decoding = PAPER_DECODING if config.decoding == "paper" else CPU_DECODING
        folder = state.get("checkpoint_dir")
        path = Path(folder) if folder else self.base_weights(resolve_model)
        policy = Policy.load(path, config, temperature=decoding.temperature)
        if folder:
            policy.load_optimizer(Path(folder))
        version = f"{self.run_id}-s{state['step']}"
        return policy, self.make_source(policy, decoding, version)

    def base_weights(self, resolve_model: Callable[[str], Path]) -> Path:
        if self.config.policy != "model":
            # a test double trains real tensors of the tiny model, whatever the preset names
            return resolve_model("tiny")
        if self.config.warm_start.enabled:  # SFT first (cached by fingerprint): see warm_start.py
            from services.trainer.warm_start import WarmStartPlan, warm_start

            result = warm_start(WarmStartPlan.from_trainer_config(self.config))
            self.record["warm_start"] = {
                "path": str(result.path),
                "fingerprint": result.fingerprint,
                "cached": result.cached,
                "summary": result.summary,
            }
            self.save_record()
            return result.path
        return resolve_model(self.config.model)

    def make_source(self, policy: Policy, decoding, version: str):
        from services.trainer.rollouts import EngineRollouts, SimulatedRollouts

        config = self.config
        if config.policy == "simulated":
            return SimulatedRollouts(
                self.simulated_model(),
                vocab_size=policy.model.get_input_embeddings().weight.shape[0],
                prompt_tokens=config.simulated.prompt_tokens,
                generated_tokens=config.simulated.generated_tokens,
                technical_failure_rate=config.simulated.technical_failure_rate,
                checkpoint_id=version,
            )
        from shared.agent.runner import RolloutConfig
        from shared.shopsim.env import ShopEnv

        rollout = RolloutConfig(
            decoding=decoding,
            concurrency=config.concurrency,
            max_turns=config.max_turns,
            **({"prompt_version": config.prompt_version} if config.prompt_version else {}),
        )
        env = ShopEnv.from_preset(config.env_preset)
        if config.policy == "procedural":
            from shared.agent.backends import make_backend

            backend = make_backend("procedural", "procedural", checkpoint_id=version)
        else:
            from shared.agent.backends.transformers_backend import TransformersBackend

            backend = TransformersBackend(
                policy.model, policy.tokenizer, model_id=config.model, checkpoint_id=version
            )
        test_double = config.policy == "procedural"
        return EngineRollouts(
            env,
            backend,
            rollout,
            split=config.split,
            tokenizer=policy.tokenizer if test_double else None,
        )

    def simulated_model(self):
        from shared.agent.backends.simulated import SimulatedPolicyModel

        sim = self.config.simulated
        return SimulatedPolicyModel(
            seed=self.config.seed,
            base_success=tuple(sim.base_success),  # type: ignore[arg-type]
            chunk_effect=sim.chunk_effect,
            env_preset=self.config.env_preset,
        )

    def train_round(self, state: dict[str, Any], policy: Policy, source, tasks) -> None:
        config, round_index = self.config, state["round"]
        record = self.round_record(round_index)
        try:
            bank = self.pin_bank(state["bank_id"], record.get("bank_hash"))
        except Unavailable as error:
            raise _unavailable(
                "registry", self.record["services"]["registry"], error, "intraskill registry serve"
            ) from None
        curriculum, injected = curriculum_from_bank(bank, config)
        record.update(
            bank_id=bank.id,
            bank_hash=bank.content_hash,
            curriculum_state_id=curriculum.state_id,
            q=curriculum.q,
            rho={chunk.slug: chunk.rho for chunk in curriculum.chunks},
        )
        self.save_record()
        all_wrong: list[tuple[int, GroupOutcome]] = []
        first = state["step"] - round_index * config.steps_per_round
        with self.progress() as progress:
            bar = progress.add_task(
                f"round {round_index} (bank {bank.id})",
                total=config.steps_per_round,
                completed=first,
            )
            for step_in_round in range(first, config.steps_per_round):
                step = state["step"] + 1
                began = time.perf_counter()
                outcome = rollout_step(
                    source,
                    curriculum,
                    injected,
                    tasks,
                    round_index=round_index,
                    first_group_index=state["next_group_index"],
                    group_size=config.group_size,
                    groups_per_wave=config.groups_per_wave,
                    groups_admitted=config.groups_admitted,
                    spread_epsilon=config.spread_epsilon,
                    max_consecutive_failures=config.max_consecutive_failed_groups,
                )
                all_wrong += [(step, group) for group in outcome.generated if group.all_wrong]
                trajectories = [t for group in outcome.admitted for t in group.trajectories]
                samples = training_samples(trajectories)
                by_episode: dict[str, list] = {}
                for sample in samples:
                    by_episode.setdefault(sample.episode_id, []).append(sample)
                episodes = [
                    by_episode[t.episode_id] for t in trajectories if t.episode_id in by_episode
                ]
                stats = policy.train_step(episodes)
                source.weights_changed(f"{self.run_id}-s{step}")
                state.update(
                    step=step, task_cursor=tasks.cursor, next_group_index=outcome.next_group_index
                )
                line = step_metrics(
                    outcome,
                    stats,
                    curriculum,
                    round_index=round_index,
                    step=step,
                    step_in_round=step_in_round + 1,
                    timings={**outcome.timings, "step_s": time.perf_counter() - began},
                )
                self.metrics.append(line)
                state["metrics_lines"] += 1
                progress.update(
                    bar,
                    advance=1,
                    description=f"round {round_index} step {step}: reward "
                    f"{line['reward'] or 0:.3f} loss {line['loss']:+.4f}",
                )
        try:
            self.pin_bank(bank.id, bank.content_hash)  # the bank never changes inside an interval
        except Unavailable as error:
            raise _unavailable(
                "registry", self.record["services"]["registry"], error, "intraskill registry serve"
            ) from None
        self.save_checkpoint(state, policy, round_index)
        self.record_evidence(state, round_index, all_wrong)
        state["phase"] = "compile"
        self.save_state(state)

    def save_checkpoint(self, state: dict[str, Any], policy: Policy, round_index: int) -> None:
        checkpoint_id = f"{self.run_id}-r{round_index}"
        folder = self.out / "checkpoints" / f"round-{round_index:03d}"
        policy.save(folder)
        if self.config.policy == "simulated":
            self.simulated_model().write(folder)  # the gate's simulated backend reads it
        _write_json(folder / "trainer_state.json", {**state, "checkpoint_id": checkpoint_id})
        try:
            self.registry.request(
                "POST",
                "/v1/checkpoints",
                json={
                    "id": checkpoint_id,
                    "uri": folder.as_uri(),
                    "step": state["step"],
                    "round": round_index,
                },
                idempotency_key=f"{self.run_id}:checkpoint:{round_index}",
            )
        except Conflict:
            pass  # registered before a restart
        except Unavailable as error:
            raise _unavailable(
                "registry", self.record["services"]["registry"], error, "intraskill registry serve"
            ) from None
        state["checkpoint_dir"] = str(folder)
        state["checkpoint_id"] = checkpoint_id
        record = self.round_record(round_index)
        record.update(
            checkpoint_id=checkpoint_id, checkpoint_uri=folder.as_uri(), step=state["step"]
        )
        self.save_record()

    def record_evidence(
        self, state: dict[str, Any], round_index: int, groups: list[tuple[int, GroupOutcome]]
    ) -> None:
        """All-wrong groups: registry evidence rows and analyst submissions, both idempotent."""
        from shared.analyst_api.client import AnalystError

        folder = self.out / "evidence"
        folder.mkdir(exist_ok=True)
        path = folder / f"round-{round_index:03d}.jsonl"
        with path.open("w") as handle:
            for _, group in groups:
                for trajectory in group.trajectories:
                    handle.write(trajectory.to_json() + "\n")
        bank_id, checkpoint_id = state["bank_id"], state["checkpoint_id"]
        record = self.round_record(round_index)
        bank_hash, state_id = record["bank_hash"], record["curriculum_state_id"]
        evidence_ids = []
        for step, group in groups:
            treatment = Treatment(
                mode=group.treatment.mode,
                inclusion=list(group.treatment.inclusion),
                hash=state_id,
            )
            body = EvidenceCreate(
                task_id=group.task_id,
                round=round_index,
                step=step,
                group_index=group.index,
                treatment=treatment,
                bank_id=bank_id,
                checkpoint_id=checkpoint_id,
            ).model_dump(mode="json")
            try:
                response = self.registry.request(
                    "POST",
                    "/v1/evidence",
                    json=body,
                    idempotency_key=f"{self.run_id}:evidence:{round_index}:{group.index}",
                )
                evidence_id = response.json()["id"]
                submission = {
                    "run_id": self.run_id,
                    "round": round_index,
                    "step": step,
                    "group_index": group.index,
                    "task_id": group.task_id,
                    "bank_id": bank_id,
                    "bank_hash": bank_hash,
                    "treatment": treatment.model_dump(mode="json"),
                    "siblings": [
                        {
                            "reward": t.reward,
                            "success": 0,
                            "trajectory_uri": f"{path.as_uri()}#{t.episode_id}",
                        }
                        for t in group.trajectories
                    ],
                    "evidence_id": evidence_id,
                    "checkpoint_id": checkpoint_id,
                }
                self.analyst.submit_all_wrong_group(submission)
            except Unavailable as error:
                raise _unavailable(
                    "registry",
                    self.record["services"]["registry"],
                    error,
                    "intraskill registry serve",
                ) from None
            except AnalystError as error:
                if error.status_code == 409:  # submitted before a restart
                    continue
                if error.status_code == 0 or error.status_code >= 500:
                    raise _unavailable(
                        "analyst",
                        self.record["services"]["analyst"],
                        error,
                        "intraskill analyst serve",
                    ) from None
                raise
            evidence_ids.append(evidence_id)
        record.update(
            all_wrong_groups=len(groups), evidence_ids=evidence_ids, evidence_uri=path.as_uri()
        )
        self.save_record()

    def compile_round(self, state: dict[str, Any]) -> None:
        from shared.analyst_api.client import AnalystError

        round_index, record = state["round"], self.round_record(state["round"])
        backend = {"model": "transformers", "simulated": "simulated", "procedural": "procedural"}[
            self.config.policy
        ]
        body = {
            "run_id": self.run_id,
            "round": round_index,
            "bank_id": state["bank_id"],
            "policy": {
                "checkpoint_id": state["checkpoint_id"],
                "weights_uri": Path(state["checkpoint_dir"]).as_uri(),
                "backend": backend,
            },
            "env_preset": self.config.env_preset,
            "max_candidates": self.config.gate.max_candidates,
        }
        try:
            job = self.analyst.compile_round(
                body, idempotency_key=f"{self.run_id}:compile:{round_index}"
            )
            with heartbeat(self.out):  # the liveness probe's sign of life while waiting
                done = self.analyst.wait(
                    job.id, timeout=self.config.gate.timeout_s, poll=self.config.gate.poll_s
                )
        except AnalystError as error:
            if error.status_code == 0 or error.status_code >= 500:
                raise _unavailable(
                    "analyst", self.record["services"]["analyst"], error, "intraskill analyst serve"
                ) from None
            raise RunError(f"the analyst refused or failed the compile: {error}") from None
        result = done.result or {}
        record.update(
            compile_job_id=job.id,
            candidate_ids=list(result.get("candidate_ids", [])),
            funnel=result.get("funnel"),
        )
        self.save_record()
        state["phase"] = "gate"
        self.save_state(state)

    def gate_round(self, state: dict[str, Any]) -> None:
        config, round_index = self.config, state["round"]
        record = self.round_record(round_index)
        url = self.record["services"]["evaluator"]
        if not record.get("candidate_ids") and not self.pin_bank(state["bank_id"], None).entries:
            self.keep_bank_without_gate(state, record)
            return
        try:
            job_id = record.get("gate_job_id")
            job = self._known_gate_job(job_id)
            if job is None or (job["status"] == "failed" and job.get("error") == "interrupted"):
                job = self.evaluator.find_gate(
                    round_index=round_index, checkpoint_id=state["checkpoint_id"]
                )
            if job is None:
                job = self.submit_gate(state, record)
            if job is None:
                self.keep_bank_without_gate(state, record, reason="no identifiable design")
                return
            record["gate_job_id"] = job["id"]
            self.save_record()
            self.console.print(f"round {round_index}: gate job {job['id']} on {url}")
            with heartbeat(self.out):  # a 400-task gate outlasts the liveness window
                job = self.evaluator.wait(
                    job["id"], poll=config.gate.poll_s, timeout=config.gate.timeout_s
                )
        except EvaluatorError as error:
            if error.status_code == 0:
                raise _unavailable("evaluator", url, error, "intraskill gate serve") from None
            raise RunError(f"the evaluator refused the gate: {error}") from None
        except (httpx.HTTPError, StackError) as error:
            raise _unavailable("evaluator", url, error, "intraskill gate serve") from None
        result = job.get("result") or {}
        registry = result.get("registry") or {}
        complete = job["status"] == "succeeded" and result.get("status") == "complete"
        next_bank = registry.get("bank_id") if complete else None
        record.update(
            gate_status=result.get("status") or job["status"],
            gate_error=job.get("error"),
            gate_run_id=registry.get("gate_run_id"),
            gate_decision_id=registry.get("decision_id"),
            next_bank_id=next_bank or state["bank_id"],
            adopted=bool(next_bank),
        )
        self.save_record()
        self.console.print(
            f"round {round_index}: gate {record['gate_status']}, run {record['gate_run_id']}; "
            + (f"adopted bank {next_bank}" if next_bank else f"keeping bank {state['bank_id']}")
        )
        state.update(round=round_index + 1, phase="train", bank_id=next_bank or state["bank_id"])
        self.save_state(state)

    def submit_gate(self, state: dict[str, Any], record: dict[str, Any]) -> dict[str, Any] | None:
        """Submit the round's gate; None when no mask seed tried gives an identifiable design.

        A small gate (few tasks, many columns) can draw masks under which some coefficient is
        not identified or a task has leverage 1 (HC3 undefined); the evaluator refuses such a
        design before any rollout. The masks are then drawn again from the next seed, up to
        MASK_SEED_ATTEMPTS seeds; the seed used is in the round's record and the gate's."""
        gate = self.config.gate
        body = {
            "round": state["round"],
            "checkpoint_id": state["checkpoint_id"],
            "alias": gate.alias,
            "base_bank_id": state["bank_id"],
            "candidate_ids": record.get("candidate_ids", []),
            "n_tasks": gate.val_tasks,
            "budget": gate.budget,
            "move_alias": True,
        }
        for mask_seed in range(gate.mask_seed, gate.mask_seed + MASK_SEED_ATTEMPTS):
            try:
                job = self.evaluator.submit_gate({**body, "mask_seed": mask_seed})
            except EvaluatorError as error:
                if DESIGN_NOT_IDENTIFIED not in error.error_types:
                    raise
                self.console.print(f"round {state['round']}: mask seed {mask_seed}: {error}")
                continue
            record["mask_seed"] = mask_seed
            return job
        return None

    def keep_bank_without_gate(
        self,
        state: dict[str, Any],
        record: dict[str, Any],
        *,
        reason: str = "empty pool (no current chunk, no candidate)",
    ) -> None:
        """S_t stays and the next round begins: an empty S_t without candidates leaves nothing
        to randomize, and a gate that cannot run has not completed (the method keeps S_t)."""
        record.update(
            gate_status=f"skipped: {reason}", next_bank_id=state["bank_id"], adopted=False
        )
        self.save_record()
        self.console.print(
            f"round {state['round']}: {reason}; keeping bank {state['bank_id']} without a gate"
        )
        state.update(round=state["round"] + 1, phase="train")
        self.save_state(state)

    def _known_gate_job(self, job_id: str | None) -> dict[str, Any] | None:
        if not job_id:
            return None
        try:
            return self.evaluator.gate_job(job_id)
        except EvaluatorError as error:
            if error.status_code == 404:  # another evaluator (its jobs folder) than before
                return None
            raise

    # -- records ----------------------------------------------------------------------------

    def round_record(self, round_index: int) -> dict[str, Any]:
        rounds = self.record["rounds"]
        while len(rounds) <= round_index:
            rounds.append({"round": len(rounds)})
        return rounds[round_index]

    def save_record(self) -> None:
        _write_json(self.out / RUN_FILE, self.record)

    def save_state(self, state: dict[str, Any]) -> None:
        _write_json(self.out / STATE_FILE, state)

    def progress(self) -> Progress:
        return Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.console,
            transient=False,
        )


def train(
    config: TrainerConfig,
    out: Path,
    *,
    urls: ServiceUrls = ServiceUrls(),
    initial_bank: str | None = None,
    config_path: Path | None = None,
) -> dict[str, Any]:
    """Run (or resume) training in `out`; returns the run record (also in `out/run.json`)."""
    lock = _lock_folder(out)
    run = Run(config, out, urls=urls, initial_bank=initial_bank)
    previous = run.record.get("config")
    if previous is not None and previous != json.loads(json.dumps(config.as_dict())):
        raise RunError(f"{out} holds a run with another config; use a new --out folder")
    if config_path is not None:
        run.record["config_path"] = str(config_path)
    try:
        run.start_services()
        return run.execute()
    except StackError as error:
        raise RunError(str(error)) from None
    except Unavailable as error:
        raise _unavailable(
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
