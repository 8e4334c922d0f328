"""The demo's cold-start phase: the analyst's Trace2Skill job (bare runs -> cards -> drafts ->
Gate A -> S_0), and the `current` alias pointed at S_0."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shared.apps.demo.options import JOB_TIMEOUT_S, DemoError
from shared.apps.demo.session import DemoSession
from shared.kit.loopback import POLICY_BACKENDS

INTERRUPTED_RETRIES = 3


def cold_start(session: DemoSession) -> None:
    if session.state.done("cold start"):
        return
    session.display.phase("cold start", "bare runs -> cards -> drafts -> Gate A -> S_0")
    result = cold_start_result(session, cold_start_request(session))
    s0 = result.get("s0_bank_id") or empty_s0(session, result)
    session.registry("operator").point_alias("current", s0, reason=f"demo {session.run_id}: S_0")
    session.state.finish("cold start", s0_bank_id=s0, cold_start=result)
    session.display.note(s0_note(s0, result))


def cold_start_request(session: DemoSession) -> dict[str, Any]:
    """The analyst's cold-start body: the base checkpoint, bare runs, and Gate A as the run's
    gates admit (gate.admit = lower_bound: by the lower bound)."""
    facts, state = session.facts, session.state
    return {
        "run_id": session.run_id,
        "policy": {
            "checkpoint_id": state.get("base_checkpoint"),
            "weights_uri": Path(state.get("base_dir")).as_uri(),
            "backend": POLICY_BACKENDS[session.options.policy],
        },
        "env_preset": facts.env_preset,
        "n_tasks": session.options.cold_start_tasks,
        "gate_a": True,
        "gate_a_tasks": facts.val_tasks,
        "gate_a_admit": "lower_bound" if facts.gate_admit == "lower_bound" else "coefficient",
    }


def cold_start_result(session: DemoSession, body: dict[str, Any]) -> dict[str, Any]:
    """The cold-start job's result; a job the analyst reports interrupted (it restarted
    mid-job) is asked for again under a new key, and a fresh job resumes its work."""
    from shared.contracts.analyst_api.client import AnalystClient, JobFailed

    attempt = session.state.get("cold_start_attempt", 0)
    operator = session.services.tokens["operator"]  # a cold start is an operator's act
    with AnalystClient(session.services.analyst.url, token=operator) as analyst:
        while True:
            key = f"{session.run_id}:cold-start:{attempt}"
            job = analyst.cold_start(body, idempotency_key=key)
            try:
                done = analyst.wait(
                    job.id,
                    timeout=JOB_TIMEOUT_S,
                    progress=lambda j: session.job_progress("cold start", j),
                )
                return done.result or {}
            except JobFailed as error:
                if "interrupt" not in str(error) or attempt >= INTERRUPTED_RETRIES:
                    raise DemoError(f"cold start failed: {error}") from None
                attempt += 1
                session.state.set(cold_start_attempt=attempt)


def empty_s0(session: DemoSession, result: dict[str, Any]) -> int:
    """Gate A kept no draft: S_0 is the empty bank (the policy starts skill-free)."""
    drafts = len(result.get("draft_version_ids", []))
    why = (
        f"Gate A incomplete on {drafts} drafts"
        if result.get("gate_a_status") == "incomplete"
        else f"Gate A kept none of {drafts} drafts"
    )
    bank = session.registry("operator").create_frozen_bank(
        [], note=f"empty S_0: {why}", idempotency_key=f"{session.run_id}:s0:empty"
    )
    session.display.note("Gate A kept no draft: S_0 is the empty bank")
    return bank.id


def s0_note(s0: int, result: dict[str, Any]) -> str:
    kept = (
        f"Gate A INCOMPLETE ({result.get('gate_a_error')}), no decision"
        if result.get("gate_a_status") == "incomplete"
        else f"{result.get('s0_size') or 0} chunks"
    )
    return (
        f"S_0 = bank {s0}: {kept} from "
        f"{len(result.get('draft_version_ids', []))} drafts, {result.get('n_cards')} cards "
        f"on {result.get('n_trajectories')} bare runs"
    )
