"""The checkpoint that closes a round: HF weights, optimizer state and the run state beside
them, registered in the registry (idempotently: a restart re-registers nothing)."""

from __future__ import annotations

from services.trainer.policy import Policy
from services.trainer.policy_loading import simulated_model
from services.trainer.run_context import RunContext, RunState, write_json
from shared.contracts.registry_api.client import Conflict, Unavailable
from shared.contracts.registry_api.schemas import CheckpointCreate

TRAINER_STATE_FILE = "trainer_state.json"


def checkpoint_folder(context: RunContext, round_index: int):
    return context.out / "checkpoints" / f"round-{round_index:03d}"


def save_checkpoint(context: RunContext, state: RunState, policy: Policy, round_index: int) -> None:
    checkpoint_id = f"{context.run_id}-r{round_index}"
    folder = checkpoint_folder(context, round_index)
    policy.save(folder)
    if context.config.policy == "simulated":
        simulated_model(context.config).write(folder)  # the gate's simulated backend reads it
    at_save = state.model_copy(update={"checkpoint_id": checkpoint_id})
    write_json(folder / TRAINER_STATE_FILE, at_save.model_dump(mode="json"))
    try:
        context.clients.registry.request(
            "POST",
            "/v1/checkpoints",
            json=CheckpointCreate(
                id=checkpoint_id, uri=folder.as_uri(), step=state.step, round=round_index
            ).model_dump(mode="json"),
            idempotency_key=f"{context.run_id}:checkpoint:{round_index}",
        )
    except Conflict:
        pass  # registered before a restart
    except Unavailable as error:
        raise context.registry_unavailable(error) from None
    state.checkpoint_dir, state.checkpoint_id = str(folder), checkpoint_id
    context.record.round(round_index).update(
        checkpoint_id=checkpoint_id, checkpoint_uri=folder.as_uri(), step=state.step
    )
    context.record.save()
