"""One run folder's session: what every phase of the demo (and the experiment) works with.

The run folder and its state, the services once started, one registry client per role, the
children, the display; `evaluation` asks the evaluator for a job this run may already have asked
for, and `close` stops everything the session started.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from shared.apps.demo.children import Children
from shared.apps.demo.display import DemoDisplay
from shared.apps.demo.options import JOB_TIMEOUT_S, DemoError, DemoOptions, PresetFacts, run_id_for
from shared.apps.demo.services import Services
from shared.apps.demo.state import DemoState
from shared.contracts.jobs import JobPublic
from shared.contracts.registry_api.client import RegistryClient

Phase = Callable[[], None]


class DemoSession:
    def __init__(self, options: DemoOptions, display: DemoDisplay) -> None:
        self.options = options
        self.run_dir = options.out.resolve()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.run_id = run_id_for(self.run_dir)
        self.facts = PresetFacts.read(options.config)
        self.state = DemoState(self.run_dir)
        self.display = display
        self.children = Children(self.run_dir, display)
        self.services: Services | None = None
        self._registries: dict[str, RegistryClient] = {}
        self._refuse_other_options()

    def _refuse_other_options(self) -> None:
        """A run folder holds one run: a rerun with other options would mix two."""
        previous = self.state.get("options")
        current = {
            "policy": self.options.policy,
            "rounds": self.options.rounds,
            "config": str(self.options.config),
        }
        if previous and previous != current:
            raise DemoError(
                f"{self.run_dir} holds a demo run with {previous}; use another --out for {current}"
            )
        self.state.set(options=current, run_id=self.run_id)

    def run_phases(self, phases: list[tuple[str, Phase]], after_each: Phase | None = None) -> None:
        """Each phase in order, timed; `after_each` after every one."""
        for name, phase in phases:
            self.timed(name, phase)
            if after_each is not None:
                after_each()

    def timed(self, name: str, phase: Phase) -> None:
        """Run one phase; its wall seconds add up over resumed runs in `seconds` (summary.json)."""
        started = time.monotonic()
        phase()
        seconds = dict(self.state.get("seconds") or {})
        seconds[name] = round(seconds.get(name, 0.0) + time.monotonic() - started, 1)
        self.state.set(seconds=seconds)

    def registry(self, role: str) -> RegistryClient:
        """The registry client of `role` (one per role, closed with the session)."""
        if role not in self._registries:
            self._registries[role] = RegistryClient(
                self.services.registry.url, self.services.tokens[role]
            )
        return self._registries[role]

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
                    progress=lambda job: self.job_progress("test", job),
                )  # fmt: skip
        except (EvaluatorError, TimeoutError) as error:
            raise DemoError(f"{name} evaluation failed: {error}") from None
        return done.result or {}

    def job_progress(self, phase: str, job: JobPublic) -> None:
        progress = job.progress
        detail = progress.get("phase") or progress.get("stage") or job.status
        done, total = progress.get("done"), progress.get("total")
        counts = f" {done}/{total}" if done is not None and total else ""
        self.display.phase(phase, f"{detail}{counts}")

    def trainer_argv(
        self, *, config: str, out: str, initial_bank: int, extra: list[str]
    ) -> list[str]:
        """`train run` against this session's services."""
        urls = self.state.get("urls")
        return [
            "train", "run",
            "--config", config,
            "--out", out,
            "--policy", self.options.policy,
            "--registry-url", urls["registry"],
            "--evaluator-url", urls["evaluator"],
            "--analyst-url", urls["analyst"],
            *extra,
            "--initial-bank", str(initial_bank),
        ]  # fmt: skip

    def close(self) -> None:
        """Stop the running child (if any), the clients and every service, whatever happened."""
        self.children.stop()
        for client in self._registries.values():
            client.close()
        if self.services is not None:
            self.services.stop()
