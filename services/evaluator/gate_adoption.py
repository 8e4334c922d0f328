"""Adopt a recorded gate's bank: point the gate's alias at it.

The alias moves with If-Match on the ETag read when the gate was planned, so a concurrent move
is never overwritten; at cold start, when the alias does not exist yet, it is created. Whatever
stops the move (the alias moved or was created meanwhile, or it did not point at the base bank
when the gate started) is said in the record's `alias_note`, and the alias is left as is.
"""

from __future__ import annotations

from services.evaluator.gate_planning import RegistryGate
from services.evaluator.gate_recording import RecordedGate
from shared.contracts.registry_api.client import Conflict, PreconditionFailed, RegistryClient

NOT_MOVED = "alias not moved (move_alias off)"


def adopt_bank(
    client: RegistryClient, gate: RegistryGate, recorded: RecordedGate, *, round: int
) -> None:
    """Point `gate.alias` at the bank the gate created (none created: nothing to adopt)."""
    if recorded.bank_id is None:
        return
    reason = f"gate run {recorded.gate_run_id} ({gate.kind.value}, round {round}) complete"
    decision_id = recorded.decision_id
    if gate.alias_absent:
        try:
            client.create_alias(
                gate.alias, recorded.bank_id, reason=reason, gate_decision_id=decision_id
            )
            recorded.alias_moved = True
        except Conflict as error:
            recorded.alias_note = f"{gate.alias} was created meanwhile; left as is ({error})"
    elif gate.alias_etag is None:
        recorded.alias_note = f"{gate.alias} did not point at the base bank when the gate started"
    else:
        try:
            client.move_alias(
                gate.alias,
                recorded.bank_id,
                reason=reason,
                if_match=gate.alias_etag,
                gate_decision_id=decision_id,
            )
            recorded.alias_moved = True
        except PreconditionFailed as error:
            recorded.alias_note = f"{gate.alias} moved since the gate started; left as is ({error})"


def leave_alias(recorded: RecordedGate) -> None:
    """The request keeps the alias where it is: say so beside the bank it did not adopt."""
    if recorded.bank_id is not None:
        recorded.alias_note = NOT_MOVED
