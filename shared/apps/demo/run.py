"""The demo's phases, in order, each skipped on a rerun once done.

1. services: registry (embedded SQLite in the run folder unless DATABASE_URL), evaluator and
   analyst as real processes on loopback, each waited on until ready;
2. environment: the ShopSim catalog and splits of the preset;
3. warm start (`--policy model`): `intraskill train warm-start`, cached by fingerprint; the base
   checkpoint is registered;
4. cold start: the analyst's Trace2Skill job (bare runs -> cards -> drafts -> Gate A -> S_0);
5. train: `intraskill train run ... --rounds N --initial-bank S_0` as a child process, followed
   through its `state.json` and `metrics.jsonl`;
6. test: the evaluator's four-condition evaluation on the test split;
7. report: `summary.json`, the registry snapshot, `report.md` and `report.html`.
"""

from __future__ import annotations

import hashlib
import json
import re
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.apps.demo.display import DemoDisplay
from shared.apps.demo.services import BACKENDS, Services, demo_marker, start_services
from shared.apps.demo.state import DemoState
from shared.contracts.jobs import JobPublic
from shared.kit.processes import ServiceFailed
from shared.runtime.noise_floor import aa_condition

REPO = Path(__file__).resolve().parents[3]
DEFAULT_CONFIG = REPO / "configs" / "cpu.toml"


@dataclass(frozen=True)
class PolicyDefaults:
    """The demo's scale for one policy when the command line does not set it."""

    config: Path
    rounds: int
    cold_start_tasks: int


# SmolLM2: the CPU preset at the size that fits two cores. The procedural test double costs
# almost nothing per rollout, so it gets gates on all validation tasks, a wider cold start and a
# third round: at the CPU preset's size its gates could not see the bank's effect reliably.
POLICY_DEFAULTS = {
    "model": PolicyDefaults(DEFAULT_CONFIG, rounds=2, cold_start_tasks=32),
    "procedural": PolicyDefaults(
        REPO / "configs" / "procedural.toml", rounds=3, cold_start_tasks=120
    ),
}
JOB_TIMEOUT_S = 24 * 3600.0  # a cold start or a test on a big model runs for hours


class DemoError(RuntimeError):
    """The demo stopped; the message says why and what to do."""


@dataclass(frozen=True)
class DemoOptions:
    policy: str
    out: Path
    config: Path = DEFAULT_CONFIG
    rounds: int = 2
    cold_start_tasks: int = 32
    test_tasks: int = 40
    database_url: str | None = None
    warm_start_eval_tasks: int | None = None  # None: the config's [warm_start] eval_tasks
    warm_start_reading_hints: float | None = None  # None: the config's [warm_start] share


@dataclass(frozen=True)
class PresetFacts:
    """What the demo reads from the trainer's TOML config."""

    steps_per_round: int
    env_preset: str
    decoding: str
    max_turns: int | None
    model: str
    val_tasks: int
    gate_admit: str = "gate"

    @classmethod
    def read(cls, path: Path) -> PresetFacts:
        data = tomllib.loads(path.read_text())
        return cls(
            steps_per_round=int(data.get("steps_per_round", 20)),
            env_preset=str(data.get("env_preset", "cpu")),
            decoding=str(data.get("decoding", "cpu")),
            max_turns=data.get("max_turns"),
            model=str(data.get("model", "smollm2")),
            val_tasks=int(data.get("gate", {}).get("val_tasks", 400)),
            gate_admit=str(data.get("gate", {}).get("admit", "gate")),
        )


def run_id_for(run_dir: Path) -> str:
    """Unique per run folder (services and registries may be shared between runs)."""
    resolved = run_dir.resolve()
    slug = re.sub(r"[^a-z0-9-]+", "-", resolved.name.lower()).strip("-")[:24] or "demo"
    return f"{slug}-{hashlib.sha256(str(resolved).encode()).hexdigest()[:6]}"


class Demo:
    def __init__(self, options: DemoOptions, display: DemoDisplay) -> None:
        self.options = options
        self.run_dir = options.out.resolve()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.run_id = run_id_for(self.run_dir)
        self.facts = PresetFacts.read(options.config)
        self.state = DemoState(self.run_dir)
        self.display = display
        self.services: Services | None = None
        self.trainer: subprocess.Popen | None = None
        previous = self.state.get("options")
        current = {
            "policy": options.policy,
            "rounds": options.rounds,
            "config": str(options.config),
        }
        if previous and previous != current:
            raise DemoError(
                f"{self.run_dir} holds a demo run with {previous}; use another --out for {current}"
            )
        self.state.set(options=current, run_id=self.run_id)

    @property
    def train_dir(self) -> Path:
        # named after the run: the trainer derives its registry-visible run id from it
        return self.run_dir / "train" / self.run_id

    # ------------------------------------------------------------------ phases

    def run(self) -> dict[str, Any]:
        if self.state.resumed:
            self.display.note(f"resuming the demo in {self.run_dir}: done {self.state.get('done')}")
        phases = (
            ("services", self.start),
            ("environment", self.environment),
            ("warm start", self.base_checkpoint),
            ("cold start", self.cold_start),
            ("train", self.train),
            ("test", self.test),
        )
        try:
            for name, phase in phases:
                self._timed(name, phase)
            return self.report()
        finally:
            self.stop()

    def _timed(self, name: str, phase) -> None:
        """Run one phase; its wall seconds add up over resumed runs in `seconds` (summary.json)."""
        started = time.monotonic()
        phase()
        seconds = dict(self.state.get("seconds") or {})
        seconds[name] = round(seconds.get(name, 0.0) + time.monotonic() - started, 1)
        self.state.set(seconds=seconds)

    def start(self) -> None:
        facts = self.facts
        self.display.phase("services", "registry, evaluator, analyst")
        try:
            self.services = self._start_services(facts)
        except ServiceFailed as error:
            raise DemoError(str(error)) from None
        urls = {s.name: s.url for s in self.services.started}
        self.state.set(urls=urls)
        self.display.note("services ready: " + ", ".join(f"{k} {v}" for k, v in urls.items()))

    def _start_services(self, facts: PresetFacts) -> Services:
        return start_services(
            self.run_dir,
            database_url=self.options.database_url,
            policy=self.options.policy,
            env_preset=facts.env_preset,
            decoding=facts.decoding,
            max_turns=facts.max_turns,
            on_start=lambda name: self.display.phase("services", f"waiting for {name} /readyz"),
        )

    def environment(self) -> None:
        if self.state.done("environment"):
            return
        self.display.phase("environment", f"ShopSim preset {self.facts.env_preset}")
        from shared.runtime.shopsim.env import ShopEnv

        env = ShopEnv.from_preset(self.facts.env_preset)
        splits = {split: len(env.task_ids(split)) for split in ("train", "val", "test")}
        self.state.finish("environment", splits=splits)
        self.display.note(f"ShopSim {self.facts.env_preset}: tasks per split {splits}")

    def base_checkpoint(self) -> None:
        """The base policy's weights (warm-started for the model) registered as a checkpoint."""
        if self.state.done("warm start"):
            return
        if self.options.policy == "model":
            self.display.phase("warm start", "SFT on heuristic trajectories (cached)")
            summary = self._warm_start()
            base_dir, note = Path(summary["path"]), f"warm start {summary.get('checkpoint_id')}"
        else:
            self.display.phase("warm start", "none for a test-double policy")
            from shared.runtime.agent.models import resolve_model

            base_dir, note = resolve_model(self.facts.model), "test double: no warm start"
        config = self._train_config(base_dir)
        checkpoint_id = f"{self.run_id}-base"
        self._registry("trainer").request(
            "POST",
            "/v1/checkpoints",
            json={"id": checkpoint_id, "uri": base_dir.as_uri(), "step": 0, "round": 0},
            idempotency_key=f"{self.run_id}:checkpoint:base",
            ok=(200, 201, 409),
        )
        self.state.finish(
            "warm start", base_checkpoint=checkpoint_id, base_dir=str(base_dir), config=str(config)
        )
        self.display.note(f"base checkpoint {checkpoint_id} ({note})")

    def _warm_start(self) -> dict[str, Any]:
        """The SFT warm start as a child process (cached by fingerprint), unless the config
        turns it off (the paper's base model already acts validly): then the base is the
        configured model itself."""
        preset = tomllib.loads(self.options.config.read_text())
        if not preset.get("warm_start", {}).get("enabled", False):
            from shared.runtime.agent.models import resolve_model

            path = resolve_model(preset["model"])
            return {"path": str(path), "checkpoint_id": "none (disabled)"}
        log = self.run_dir / "logs" / "warm-start.log"
        argv = ["train", "warm-start", "--config", str(self.options.config), "--json"]
        if self.options.warm_start_eval_tasks is not None:
            argv += ["--eval-tasks", str(self.options.warm_start_eval_tasks)]
        if self.options.warm_start_reading_hints is not None:
            argv += ["--reading-hints", str(self.options.warm_start_reading_hints)]
        output = self._child("warm start", argv, log, env={})
        summary = last_json_line(output)
        if summary is None:
            raise DemoError(f"warm start printed no JSON summary; see {log}")
        return summary

    def _train_config(self, base_dir: Path) -> Path:
        """The trainer's config for this run: the preset, with the base weights for the model."""
        text = self.options.config.read_text()
        if self.options.policy == "model":
            text, replaced = re.subn(
                r"^model\s*=.*$", f'model = "{base_dir}"', text, count=1, flags=re.M
            )
            if not replaced:
                text = f'model = "{base_dir}"\n' + text
            text = without_warm_start(text)
        path = self.run_dir / "train-config.toml"
        path.write_text(text)
        return path

    def cold_start(self) -> None:
        if self.state.done("cold start"):
            return
        from shared.contracts.analyst_api.client import AnalystClient
        from shared.contracts.analyst_api.client import JobFailed as AnalystJobFailed

        self.display.phase("cold start", "bare runs -> cards -> drafts -> Gate A -> S_0")
        body = {
            "run_id": self.run_id,
            "policy": {
                "checkpoint_id": self.state.get("base_checkpoint"),
                "weights_uri": Path(self.state.get("base_dir")).as_uri(),
                "backend": BACKENDS[self.options.policy],
            },
            "env_preset": self.facts.env_preset,
            "n_tasks": self.options.cold_start_tasks,
            "gate_a": True,
            "gate_a_tasks": self.facts.val_tasks,
            # Gate A admits as the run's gates do (gate.admit = lower_bound: by the lower bound)
            "gate_a_admit": "lower_bound"
            if self.facts.gate_admit == "lower_bound"
            else "coefficient",
        }
        attempt = self.state.get("cold_start_attempt", 0)
        operator = self.services.tokens["operator"]  # a cold start is an operator's act
        with AnalystClient(self.services.analyst.url, token=operator) as analyst:
            while True:
                job = analyst.cold_start(
                    body, idempotency_key=f"{self.run_id}:cold-start:{attempt}"
                )
                try:
                    done = analyst.wait(
                        job.id,
                        timeout=JOB_TIMEOUT_S,
                        progress=lambda j: self._job_progress("cold start", j),
                    )
                    break
                except AnalystJobFailed as error:
                    if "interrupt" not in str(error) or attempt >= 3:
                        raise DemoError(f"cold start failed: {error}") from None
                    attempt += 1  # the analyst restarted mid-job: a fresh job resumes its work
                    self.state.set(cold_start_attempt=attempt)
        result = done.result or {}
        s0 = result.get("s0_bank_id") or self._empty_s0(result)
        self._point_current_at(s0)
        self.state.finish("cold start", s0_bank_id=s0, cold_start=result)
        gate = result.get("gate_a_status")
        kept = (
            f"Gate A INCOMPLETE ({result.get('gate_a_error')}), no decision"
            if gate == "incomplete"
            else f"{result.get('s0_size') or 0} chunks"
        )
        self.display.note(
            f"S_0 = bank {s0}: {kept} from "
            f"{len(result.get('draft_version_ids', []))} drafts, {result.get('n_cards')} cards "
            f"on {result.get('n_trajectories')} bare runs"
        )

    def _empty_s0(self, result: dict[str, Any]) -> int:
        """Gate A kept no draft: S_0 is the empty bank (the policy starts skill-free)."""
        registry = self._registry("operator")
        drafts = len(result.get("draft_version_ids", []))
        why = (
            f"Gate A incomplete on {drafts} drafts"
            if result.get("gate_a_status") == "incomplete"
            else f"Gate A kept none of {drafts} drafts"
        )
        bank = registry.create_frozen_bank(
            [], note=f"empty S_0: {why}", idempotency_key=f"{self.run_id}:s0:empty"
        )
        self.display.note("Gate A kept no draft: S_0 is the empty bank")
        return bank.id

    def _point_current_at(self, bank_id: int) -> None:
        from shared.contracts.registry_api.client import NotFound

        registry = self._registry("operator")
        try:
            alias = registry.get_alias("current")
        except NotFound:
            registry.create_alias("current", bank_id, reason=f"demo {self.run_id}: S_0")
            return
        if alias.bank_id != bank_id:
            registry.move_alias(
                "current", bank_id, reason=f"demo {self.run_id}: S_0", if_match=alias.etag
            )

    def train(self) -> None:
        if self.state.done("train"):
            return
        self.display.phase("train", f"{self.options.rounds} rounds with gates")
        urls = self.state.get("urls")
        argv = [
            "train", "run",
            "--config", self.state.get("config"),
            "--out", str(self.train_dir),
            "--policy", self.options.policy,
            "--registry-url", urls["registry"],
            "--evaluator-url", urls["evaluator"],
            "--analyst-url", urls["analyst"],
            "--rounds", str(self.options.rounds),
            "--initial-bank", str(self.state.get("s0_bank_id")),
        ]  # fmt: skip
        env = self.services.trainer_env()
        self._child("train", argv, self.run_dir / "logs" / "train.log", env=env, follow=True)
        record = json.loads((self.train_dir / "run.json").read_text())
        if not record.get("finished"):
            raise DemoError(f"the trainer exited without finishing; see {self.run_dir}/logs")
        self.state.finish("train", train_record=str(self.train_dir / "run.json"))

    def test(self) -> None:
        if self.state.done("test"):
            return
        rounds = json.loads((self.train_dir / "run.json").read_text())["rounds"]
        trained = rounds[-1]["checkpoint_id"]
        base = self.state.get("base_checkpoint")
        self.display.phase("test", f"4 conditions x {self.options.test_tasks} test tasks")
        conditions = [
            {"name": "base/bare", "checkpoint_id": base},
            {"name": "base/S0", "checkpoint_id": base, "bank_id": self.state.get("s0_bank_id")},
            {"name": "trained/bare", "checkpoint_id": trained},
            {"name": "trained/S_T", "checkpoint_id": trained, "bank_alias": "current"},
        ]
        body = {
            # the A/A control: base/bare again under other sampling seeds (the noise floor)
            "conditions": [*conditions, aa_condition(conditions[0])],
            "split": "test",
            "n_tasks": self.options.test_tasks,
        }
        result = self.evaluation("test", body)
        folder = self.run_dir / "test"
        folder.mkdir(exist_ok=True)
        (folder / "evaluation.json").write_text(json.dumps(result, indent=1))
        self.state.finish("test")

    def report(self) -> dict[str, Any]:
        from shared.apps.demo.summary import build_summary
        from shared.apps.report.build import build
        from shared.apps.report.data import load_run
        from shared.apps.report.document import to_html, to_markdown
        from shared.apps.report.snapshot import save_snapshot

        self.display.phase("report", "summary.json, report.md, report.html")
        registry = self._registry("reader")
        summary = build_summary(self, registry)
        (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=1))
        save_snapshot(registry, self.run_dir)
        document = build(load_run(self.run_dir))
        (self.run_dir / "report.md").write_text(to_markdown(document, self.run_dir))
        (self.run_dir / "report.html").write_text(to_html(document))
        self.state.finish("report")
        self.display.finish()
        return summary

    # ------------------------------------------------------------------ plumbing

    def _registry(self, role: str):
        from shared.contracts.registry_api.client import RegistryClient

        clients = self.__dict__.setdefault("_clients", {})
        if role not in clients:
            clients[role] = RegistryClient(self.services.registry.url, self.services.tokens[role])
        return clients[role]

    def evaluation(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """The result of the evaluation job `name` (an `EvalJobCreate` body): the job this run
        already asked for, unless it failed or the evaluator no longer knows it; DemoError when
        the evaluator refuses the job or it fails."""
        from shared.contracts.evaluator_api.client import EvaluatorClient, EvaluatorError
        from shared.contracts.evaluator_api.schemas import EvalJobCreate

        request = EvalJobCreate.model_validate(body)
        token = self.services.tokens["operator"]  # an evaluation is an operator's act
        try:
            with EvaluatorClient(self.services.evaluator.url, token=token) as evaluator:
                job_id = self.state.get(f"{name}_job")
                known = evaluator.find_job("eval", job_id) if job_id else None
                if known is None or known.status == "failed":
                    job_id = evaluator.submit("eval", request).id
                    self.state.set(**{f"{name}_job": job_id})
                done = evaluator.wait_for_job(
                    "eval", job_id, timeout=JOB_TIMEOUT_S,
                    progress=lambda job: self._job_progress("test", job),
                )  # fmt: skip
        except (EvaluatorError, TimeoutError) as error:
            raise DemoError(f"{name} evaluation failed: {error}") from None
        return done.result or {}

    def _job_progress(self, phase: str, job: JobPublic) -> None:
        progress = job.progress
        detail = progress.get("phase") or progress.get("stage") or job.status
        done, total = progress.get("done"), progress.get("total")
        counts = f" {done}/{total}" if done is not None and total else ""
        self.display.phase(phase, f"{detail}{counts}")

    def _child(
        self, name: str, argv: list[str], log: Path, *, env: dict[str, str], follow: bool = False
    ) -> str:
        """`intraskill ARGV` in its own session, output to `log`; returns the output."""
        import os

        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a") as out:
            out.write(f"\n$ intraskill {' '.join(argv)}\n")
            out.flush()
            start = out.tell()
            self.trainer = subprocess.Popen(
                [sys.executable, "-m", "shared.apps.cli", *argv],
                env={**os.environ, **demo_marker(self.run_dir), **env},
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            while self.trainer.poll() is None:
                if follow:
                    self._follow_training()
                else:
                    self.display.phase(name, last_line(log))
                time.sleep(1.0)
        code = self.trainer.returncode
        self.trainer = None
        text = log.read_text(errors="replace")[start:]
        if code != 0:
            raise DemoError(f"{name} exited with code {code}; the end of {log}:\n{text[-2500:]}")
        return text

    def _follow_training(self) -> None:
        from shared.apps.report.data import read_metrics

        state_path = self.train_dir / "state.json"
        metrics = read_metrics(self.train_dir / "metrics.jsonl")
        state = json.loads(state_path.read_text()) if state_path.exists() else {}
        episodes = sum(int(m.get("episodes_generated") or 0) for m in metrics)
        self.display.steps(
            len(metrics),
            round_index=state.get("round"),
            episodes=episodes,
            phase=state.get("phase", "starting"),
        )
        self.display.phase(
            "train", f"round {state.get('round', 0)}: {state.get('phase', 'starting')}"
        )

    def stop(self) -> None:
        """Stop the trainer (if running) and every service, whatever happened."""
        if self.trainer is not None and self.trainer.poll() is None:
            self.display.note("stopping the trainer ...")
            for signum, grace in ((signal.SIGINT, 30), (signal.SIGTERM, 15), (signal.SIGKILL, 5)):
                try:
                    os_killpg(self.trainer.pid, signum)
                    self.trainer.wait(timeout=grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
        for client in self.__dict__.get("_clients", {}).values():
            client.close()
        if self.services is not None:
            self.services.stop()


def last_line(log: Path, width: int = 70) -> str:
    """The child's latest output line (progress bars rewrite theirs with carriage returns)."""
    with log.open("rb") as handle:
        handle.seek(max(0, log.stat().st_size - 4096))
        tail = handle.read().decode(errors="replace")
    pieces = [p.strip() for p in tail.replace("\r", "\n").splitlines() if p.strip()]
    return pieces[-1][:width] if pieces else ""


def without_warm_start(text: str) -> str:
    """The preset's TOML with `[warm_start] enabled = false`: its `model` already is the warm
    start's result, and SFT on top of it would train a second, different warm start."""
    head, marker, section = text.partition("[warm_start]")
    if not marker:
        return text
    body, next_header, rest = section.partition("\n[")
    body, replaced = re.subn(r"^enabled\s*=.*$", "enabled = false", body, count=1, flags=re.M)
    if not replaced:
        body = "\nenabled = false" + body
    return head + marker + body + next_header + rest


def os_killpg(pid: int, signum: int) -> None:
    import contextlib
    import os

    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signum)


def total_steps(options: DemoOptions) -> int:
    return options.rounds * PresetFacts.read(options.config).steps_per_round


def run_demo(options: DemoOptions, display: DemoDisplay) -> dict[str, Any]:
    return Demo(options, display).run()


def last_json_line(output: str) -> dict[str, Any] | None:
    """The last line of `output` that is a JSON object (progress and log lines come before it)."""
    for line in reversed(output.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None
