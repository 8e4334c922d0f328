"""`intraskill experiment run`: arms x seeds, each its own `train run`, compared on one test set.

Phases (each skipped on a rerun once done, like the demo's, whose first four it reuses):

1. services, environment, warm start, cold start: once, shared by every arm (the same base
   checkpoint and the same S_0);
2. train: for each seed index, for each arm, `intraskill train run` in `runs/ARM-seedI/` with
   the arm's effective config (`runs/ARM-seedI/config.toml`), the seed `seed + I`, its own alias
   and its initial bank (S_0, the empty bank, or S_0 with the arm's q); a rerun resumes it;
3. base test (right after the cold start): the base policy bare, with S_0, and the bare A/A
   copy on the test tasks, so a run stopped during training has already measured S_0 at the
   start checkpoint and the test design's power;
4. test: the second evaluator job: every run's final checkpoint bare and with its final bank,
   and A/A copies (every run with its bank again under other sampling seeds), on the same test
   tasks; both jobs merged into one report (`merge.py`: episode seeds depend on task and
   sample only, so the columns pair by task as one job's would); runs whose final weights are
   byte for byte the same (arms that ended up training alike) are tested under the first
   one's checkpoint id, so the evaluator rolls them out once and labels them identical
   instead of reading noise as a difference;
   with `test_samples` > 1 every test condition is rolled out that many times per task under
   other sampling seeds and read as its per-task mean (`samples.py`);
5. confirm (when `gate.confirm_tasks` > 0): every final bank measured once on the held-out
   confirmation tasks no gate used, beside the gates' own estimate of it;
6. comparison.json, comparison.md and the figures (`report.py`).
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w

from shared.apps.demo.options import DemoError, DemoOptions
from shared.apps.demo.session import DemoSession
from shared.apps.demo.setup import setup_phases
from shared.apps.experiment.arms import Arm
from shared.apps.experiment.merge import merge_reports
from shared.apps.experiment.samples import pool_samples, with_samples
from shared.contracts.hashing import weights_digest
from shared.runtime.noise_floor import aa_condition

TEST_FILE, CONFIRM_FILE = "test/evaluation.json", "confirm/evaluation.json"
BASE_TEST_FILE, TRAINED_TEST_FILE = "test/base-evaluation.json", "test/trained-evaluation.json"
RUNS_FILE = "runs.json"


@dataclass(frozen=True)
class RunSpec:
    """One arm x seed: its folder, seed and the names of its test conditions."""

    arm: Arm
    index: int
    seed: int

    @property
    def name(self) -> str:
        return f"{self.arm.slug}-seed{self.index}"

    @property
    def alias(self) -> str:
        return f"exp-{self.arm.slug}-s{self.index}"

    @property
    def bare(self) -> str:
        return f"{self.arm.slug}/s{self.index}/bare"

    @property
    def bank(self) -> str:
        return f"{self.arm.slug}/s{self.index}/bank"


def run_specs(arms: list[Arm], seeds: int, base_seed: int) -> list[RunSpec]:
    """Seed-major order: every arm's first seed before any arm's second (a stopped experiment
    still has a complete comparison of the first seeds)."""
    return [RunSpec(arm, i, base_seed + i) for i in range(seeds) for arm in arms]


class Experiment:
    """Arms x seeds on one run folder: the demo's setup phases (one session, one S_0), then
    its own train, test and comparison."""

    def __init__(
        self, options: DemoOptions, display, arms: list[Arm], seeds: int, test_samples: int = 1
    ) -> None:
        self.session = DemoSession(options, display)
        self.options, self.display = options, display
        self.run_dir, self.run_id = self.session.run_dir, self.session.run_id
        self.state = self.session.state
        self.arms, self.seeds, self.test_samples = arms, seeds, test_samples
        chosen = {"arms": [a.name for a in arms], "seeds": seeds}
        if test_samples > 1:  # a one-sample experiment keeps the record it always had
            chosen["test_samples"] = test_samples
        previous = self.state.get("experiment")
        if previous and previous != chosen:
            raise DemoError(
                f"{self.run_dir} holds an experiment with {previous}; use another --out"
            )
        self.state.set(experiment=chosen)
        base = tomllib.loads(options.config.read_text())
        self.specs = run_specs(arms, seeds, int(base.get("seed", 20260901)))

    def run(self) -> dict[str, Any]:
        phases = [
            *setup_phases(self.session),
            ("base test", self.test_base),
            ("train", self.train_all),
            ("test", self.test_all),
        ]
        try:
            self.session.run_phases(phases, after_each=self.evidence_so_far)
            return self.write_comparison()
        finally:
            self.session.close()

    def evidence_so_far(self) -> None:
        """What is measured so far, after every phase from the cold start on."""
        if self.state.done("cold start"):
            self.write_evidence()

    # ------------------------------------------------------------------ train

    def train_all(self) -> None:
        for spec in self.specs:
            if not self.state.done(f"train {spec.name}"):
                self.train_one(spec)
        self.state.finish("train")

    def train_one(self, spec: RunSpec) -> None:
        folder = self.run_dir / "runs" / spec.name
        folder.mkdir(parents=True, exist_ok=True)
        config = folder / "config.toml"
        base = tomllib.loads(Path(self.state.get("config")).read_text())
        effective = spec.arm.config(base)
        effective.setdefault("gate", {})["alias"] = spec.alias
        effective["rounds"] = self.options.rounds
        config.write_text(tomli_w.dumps(effective))
        bank = self.initial_bank(spec)
        self.display.phase("train", f"{spec.name}: {spec.arm.doc}")
        argv = self.session.trainer_argv(
            config=str(config),
            out=str(folder / "train"),
            initial_bank=bank,
            extra=["--seed", str(spec.seed)],
        )
        services = self.session.services
        env = services.trainer_env()
        if spec.arm.overrides.get("gate", {}).get("admit") == "all":
            env["TRAINER_OPERATOR_TOKEN"] = services.tokens["operator"]  # it builds banks
        log = self.run_dir / "logs" / f"train-{spec.name}.log"
        self.session.children.run(f"train {spec.name}", argv, log, env=env, follow=folder / "train")
        record = json.loads((folder / "train" / "run.json").read_text())
        if not record.get("finished"):
            raise DemoError(f"{spec.name}: the trainer exited without finishing; see {log}")
        self.state.finish(f"train {spec.name}")

    def initial_bank(self, spec: RunSpec) -> int:
        """S_0, the empty bank (grpo) or a copy of S_0 with the arm's q; its alias points at it."""
        registry = self.session.registry("operator")
        s0 = registry.get_bank(self.state.get("s0_bank_id"))
        if spec.arm.initial_bank == "s0" and spec.arm.q is None:
            bank_id = s0.id
        else:
            entries = [] if spec.arm.initial_bank == "empty" else [
                {"chunk_version_id": e.chunk_version_id, "rho": e.rho, "coefficient": e.coefficient}
                for e in sorted(s0.entries, key=lambda e: e.position)
            ]  # fmt: skip
            q = s0.q if spec.arm.q is None else spec.arm.q
            key = f"{self.run_id}:initial:{spec.arm.slug}"
            bank_id = registry.create_frozen_bank(
                entries, q=q, note=f"experiment arm {spec.arm.name}: initial bank",
                idempotency_key=key,
            ).id  # fmt: skip
        if not (self.run_dir / "runs" / spec.name / "train" / "state.json").exists():
            # a started run's gates move its alias; only a fresh run points it at the start
            reason = f"experiment {self.run_id}: {spec.name}"
            registry.point_alias(spec.alias, bank_id, reason=reason)
        return bank_id

    # ------------------------------------------------------------------ test and confirm

    def finals(self) -> dict[str, dict[str, Any]]:
        """Per run: its final checkpoint and bank, its rounds, and its effective config."""
        finals = {}
        for spec in self.specs:
            record = json.loads(
                (self.run_dir / "runs" / spec.name / "train" / "run.json").read_text()
            )
            last = record["rounds"][-1]
            finals[spec.name] = {
                "checkpoint_id": last["checkpoint_id"],
                "bank_id": last.get("next_bank_id") or last["bank_id"],
                "weights": _local_weights_digest(last.get("checkpoint_uri")),
                "record": record,
            }
        return finals

    def base_conditions(self) -> list[dict[str, Any]]:
        base = self.state.get("base_checkpoint")
        return [
            {"name": "base/bare", "checkpoint_id": base},
            {"name": "base/s0", "checkpoint_id": base, "bank_id": self.state.get("s0_bank_id")},
        ]

    def test_base(self) -> None:
        """The start checkpoint bare, with S_0, and the bare A/A copy (no bank, no training:
        the noise floor); base/S_0 has no copy."""
        bare, s0 = self.base_conditions()
        copy = aa_condition(bare)
        body = {
            "conditions": with_samples([bare, s0, copy], self.test_samples),
            "split": "test",
            "n_tasks": self.options.test_tasks,
            "comparisons": [[copy["name"], bare["name"]], [s0["name"], bare["name"]]],
        }
        self.evaluate("base test", body, BASE_TEST_FILE)
        self.state.finish("base test")

    def test_all(self) -> None:
        """Every run's final checkpoint bare and with its final bank, with A/A copies, merged
        with the base test; then the confirmation step when the runs kept confirmation tasks."""
        finals = self.finals()
        conditions = self.final_conditions(finals)
        self.evaluate("trained test", self.trained_test_body(conditions), TRAINED_TEST_FILE)
        merged = merge_reports(
            json.loads((self.run_dir / BASE_TEST_FILE).read_text()),
            json.loads((self.run_dir / TRAINED_TEST_FILE).read_text()),
        )
        (self.run_dir / TEST_FILE).write_text(json.dumps(merged, indent=1))
        record = finals[self.specs[0].name]["record"]
        confirm = record.get("validation", {}).get("confirmation_task_ids")
        if confirm:
            body = {
                "conditions": conditions,
                "split": "val",
                "task_ids": confirm,
                "comparisons": [[s.bank, s.bare] for s in self.specs],
            }
            self.evaluate("confirm", body, CONFIRM_FILE)
        self.state.finish("test")

    def final_conditions(self, finals: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
        """Per run, bare and with its final bank, under the checkpoint its weights are tested as."""
        tested_as = same_weights_checkpoints(finals)
        return [
            condition
            for spec in self.specs
            for condition in (
                {"name": spec.bare, "checkpoint_id": tested_as[spec.name]},
                {
                    "name": spec.bank,
                    "checkpoint_id": tested_as[spec.name],
                    "bank_id": finals[spec.name]["bank_id"],
                },
            )
        ]

    def trained_test_body(self, conditions: list[dict[str, Any]]) -> dict[str, Any]:
        """The conditions and an A/A copy of every run with its bank (an arm's copies pool like
        its runs), each compared with its original."""
        originals = [c for c in conditions if "bank_id" in c]
        copies = [aa_condition(c) for c in originals]
        return {
            "conditions": with_samples([*conditions, *copies], self.test_samples),
            "split": "test",
            "n_tasks": self.options.test_tasks,
            "comparisons": [
                [aa["name"], c["name"]] for aa, c in zip(copies, originals, strict=True)
            ],
        }

    def evaluate(self, name: str, body: dict[str, Any], path: str) -> None:
        if self.state.done(name):
            return
        n = len(body.get("task_ids") or []) or body.get("n_tasks")
        self.display.phase("test", f"{name}: {len(body['conditions'])} conditions x {n} tasks")
        result = self.session.evaluation(name, body)
        target = self.run_dir / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(result, indent=1))
        self.state.finish(name)

    # ------------------------------------------------------------------ evidence

    def write_evidence(self) -> dict[str, Any]:
        """`evidence.json`: cards, Gate A, S_0, the test and its power, as far as measured."""
        from shared.apps.experiment.evidence import build_evidence, gate_a_evidence
        from shared.contracts.registry_api.client import NotFound
        from shared.contracts.registry_api.schemas import GateKind

        registry = self.session.registry("reader")
        gates = registry.list_gate_runs(kind=GateKind.gate_a)
        gate_a = None
        if gates:
            gate = max(gates, key=lambda g: g.id)
            try:
                decision = registry.get_gate_decision(gate.id)
            except NotFound:
                decision = None  # the gate never reached a decision
            gate_a = gate_a_evidence(gate, decision)
        s0 = self.state.get("s0_bank_id")
        # the whole test once it ran, else the base test alone (S_0 and the design's power)
        test_path = next(
            (p for p in (self.run_dir / TEST_FILE, self.run_dir / BASE_TEST_FILE) if p.exists()),
            None,
        )
        evidence = build_evidence(
            cards=registry.list_cards(),
            gate_a=gate_a,
            s0_size=len(registry.get_bank(s0).entries) if s0 else None,
            evaluation=json.loads(test_path.read_text()) if test_path else None,
            arm=self.specs[0].arm.slug,
            phases_done=[
                p
                for p in ("warm start", "cold start", "base test", "train", "test")
                if self.state.done(p)
            ],
        )
        (self.run_dir / "evidence.json").write_text(json.dumps(evidence, indent=1) + "\n")
        return evidence

    # ------------------------------------------------------------------ comparison

    def write_comparison(self) -> dict[str, Any]:
        from shared.apps.experiment.compare import build_comparison, run_facts
        from shared.apps.experiment.report import write_report

        self.display.phase("report", "comparison.json, comparison.md, figures")
        registry = self.session.registry("reader")
        finals = self.finals()
        runs = [
            run_facts(
                spec, finals[spec.name]["record"], self.run_dir / "runs" / spec.name, registry
            )
            for spec in self.specs
        ]
        confirm_path = self.run_dir / CONFIRM_FILE
        comparison = build_comparison(
            arms=self.arms,
            runs=runs,
            test=pool_samples(json.loads((self.run_dir / TEST_FILE).read_text())),
            confirm=json.loads(confirm_path.read_text()) if confirm_path.exists() else None,
            policy=self.options.policy,
            base_config=str(self.options.config),
        )
        (self.run_dir / "comparison.json").write_text(json.dumps(comparison, indent=1))
        write_report(self.run_dir)
        self.state.finish("report")
        self.display.finish()
        return comparison


def same_weights_checkpoints(finals: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Per run, the checkpoint id its test conditions name: its own, or the first run's (in
    `finals`' order) whose final weights have the same digest. A run without a digest (weights
    not on this machine) keeps its own."""
    first: dict[str, str] = {}
    return {
        name: first.setdefault(final["weights"], final["checkpoint_id"])
        if final["weights"]
        else final["checkpoint_id"]
        for name, final in finals.items()
    }


def _local_weights_digest(uri: str | None) -> str | None:
    if not uri or not uri.startswith("file://"):
        return None
    folder = Path(uri.removeprefix("file://"))
    return weights_digest(folder) if folder.is_dir() else None
