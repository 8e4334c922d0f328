"""The round's compile: the analyst turns the round's all-wrong groups into candidate chunks
for the gate, as a job on the frozen checkpoint (idempotent per run and round). The candidates
go into the round's record; the orchestrator hands over to the gate."""

from __future__ import annotations

from pathlib import Path

from services.trainer.heartbeat import heartbeat
from services.trainer.run_context import RunContext, RunError, RunState, unavailable
from shared.contracts.analyst_api.schemas import CompileRoundCreate, PolicySpec
from shared.kit.loopback import POLICY_BACKENDS


def compile_round(context: RunContext, state: RunState) -> None:
    from shared.contracts.analyst_api.client import AnalystError

    config, analyst = context.config, context.clients.analyst
    round_index, record = state.round, context.record.round(state.round)
    body = CompileRoundCreate(
        run_id=context.run_id,
        round=round_index,
        bank_id=state.bank_id,
        policy=PolicySpec(
            checkpoint_id=state.checkpoint_id,
            weights_uri=Path(state.checkpoint_dir).as_uri(),
            backend=POLICY_BACKENDS[config.policy],
        ),
        env_preset=config.env_preset,
        max_candidates=config.gate.max_candidates,
    )
    try:
        job = analyst.compile_round(body, idempotency_key=f"{context.run_id}:compile:{round_index}")
        with heartbeat(context.out):  # the liveness probe's sign of life while waiting
            done = analyst.wait(job.id, timeout=config.gate.timeout_s, poll=config.gate.poll_s)
    except AnalystError as error:
        if error.status_code == 0 or error.status_code >= 500:
            url = context.record.service_url("analyst")
            raise unavailable("analyst", url, error, "intraskill analyst serve") from None
        raise RunError(f"the analyst refused or failed the compile: {error}") from None
    result = done.result or {}
    record.update(
        compile_job_id=job.id,
        candidate_ids=list(result.get("candidate_ids", [])),
        funnel=result.get("funnel"),
        verification=result.get("verification", []),  # each checked card's paired counts
    )
    context.record.save()
