"""Request bodies the evaluator's tests (and the trainer's no-gate test) write into a registry;
no fixtures here, so any test folder can import them."""

from __future__ import annotations

from shared.contracts.chunks import ChunkContent
from shared.contracts.registry_api.schemas import CardOutcome, DeployableAbstraction


def content(tag: str) -> ChunkContent:
    return ChunkContent(
        title=f"Check the size first ({tag})",
        applies_when="the task names a size",
        procedure=["open the item", f"select the size ({tag})"],
        verify="the size is selected",
        avoid="buying before choosing a size",
    )


def card_body(round_number: int, task_id: str = "task-000001") -> dict:
    """An eligible ADD card with a placeholder deployable part (no gold in it)."""
    return {
        "round": round_number,
        "task_id": task_id,
        "outcome": CardOutcome.ADD,
        "eligible": True,
        "deployable": DeployableAbstraction(
            failure_mechanism="m", applicable_when="a", observable_trigger="t",
            corrective_procedure="p", verification_step="v",
        ),
    }  # fmt: skip
