"""A round's all-wrong groups: trajectories to a file, one registry evidence row each, and one
analyst submission each; every write is idempotent, so a restart resubmits nothing."""

from __future__ import annotations

from pathlib import Path

from services.trainer.rollout_step import GroupOutcome
from services.trainer.run_context import RoundRecord, RunContext, RunState, unavailable
from shared.contracts.analyst_api.schemas import AllWrongGroupSubmit, SiblingRef
from shared.contracts.registry_api.client import Unavailable
from shared.contracts.registry_api.schemas import EvidenceCreate, Treatment


def record_evidence(
    context: RunContext,
    state: RunState,
    round_index: int,
    groups: list[tuple[int, GroupOutcome]],
) -> None:
    """All-wrong groups (with the step that generated each): evidence rows and submissions."""
    from shared.contracts.analyst_api.client import AnalystError

    path = _write_trajectories(context.out / "evidence", round_index, groups)
    record = context.record.round(round_index)
    evidence_ids = []
    for step, group in groups:
        treatment = Treatment(
            mode=group.treatment.mode,
            inclusion=list(group.treatment.inclusion),
            hash=record.curriculum_state_id,
        )
        try:
            evidence_id = _evidence_row(context, state, round_index, step, group, treatment)
            context.clients.analyst.submit_all_wrong_group(
                _submission(context, state, record, step, group, treatment, evidence_id, path)
            )
        except Unavailable as error:
            raise context.registry_unavailable(error) from None
        except AnalystError as error:
            if error.status_code == 409:  # submitted before a restart
                continue
            if error.status_code == 0 or error.status_code >= 500:
                url = context.record.service_url("analyst")
                raise unavailable("analyst", url, error, "intraskill analyst serve") from None
            raise
        evidence_ids.append(evidence_id)
    record.update(
        all_wrong_groups=len(groups), evidence_ids=evidence_ids, evidence_uri=path.as_uri()
    )
    context.record.save()


def _write_trajectories(
    folder: Path, round_index: int, groups: list[tuple[int, GroupOutcome]]
) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / f"round-{round_index:03d}.jsonl"
    with path.open("w") as handle:
        for _, group in groups:
            for trajectory in group.trajectories:
                handle.write(trajectory.to_json() + "\n")
    return path


def _evidence_row(
    context: RunContext,
    state: RunState,
    round_index: int,
    step: int,
    group: GroupOutcome,
    treatment: Treatment,
) -> int:
    body = EvidenceCreate(
        task_id=group.task_id,
        round=round_index,
        step=step,
        group_index=group.index,
        treatment=treatment,
        bank_id=state.bank_id,
        checkpoint_id=state.checkpoint_id,
    ).model_dump(mode="json")
    response = context.clients.registry.request(
        "POST",
        "/v1/evidence",
        json=body,
        idempotency_key=f"{context.run_id}:evidence:{round_index}:{group.index}",
    )
    return response.json()["id"]


def _submission(
    context: RunContext,
    state: RunState,
    record: RoundRecord,
    step: int,
    group: GroupOutcome,
    treatment: Treatment,
    evidence_id: int,
    path: Path,
) -> AllWrongGroupSubmit:
    return AllWrongGroupSubmit(
        run_id=context.run_id,
        round=record.round,
        step=step,
        group_index=group.index,
        task_id=group.task_id,
        bank_id=state.bank_id,
        bank_hash=record.bank_hash,
        treatment=treatment,
        siblings=[
            SiblingRef(reward=t.reward, trajectory_uri=f"{path.as_uri()}#{t.episode_id}")
            for t in group.trajectories
        ],
        evidence_id=evidence_id,
        checkpoint_id=state.checkpoint_id,
    )
