"""A stored gate read back from the registry: what `gate refit` needs, all from the gate run's
own fields (its pool's columns, their chunk versions, its raw observations)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from services.evaluator.design import GateDesign, Slot, Version
from services.evaluator.fit import PairedObservation, Solver
from services.evaluator.gate_planning import version_id
from shared.contracts.registry_api.client import NotFound, RegistryClient
from shared.contracts.registry_api.schemas import (
    ChunkVersionPublic,
    GateRunPublic,
    ObservationPublic,
    PoolColumn,
)


def load_gate_run(
    run_id: str | int, client: RegistryClient | None = None
) -> tuple[GateDesign, list[PairedObservation], Solver]:
    """A stored gate's design (kind, slots, mask seed, split, K), raw observations and solver."""
    if client is None:
        from services.evaluator.settings import EvaluatorSettings

        client = EvaluatorSettings().registry_client()
    try:
        run = client.get_gate_run(int(run_id))
        columns = run.candidate_pool.columns
        views = {
            c.chunk_version_id: client.get_chunk_version_by_id(c.chunk_version_id) for c in columns
        }
        stored = client.list_observations(run.id)
    except (NotFound, ValueError) as error:  # an outage or a refusal is the caller's to report
        raise LookupError(f"gate run {run_id}: {error}") from None
    return stored_design(run, views), paired_observations(stored), run.solver.value  # type: ignore[return-value]


def stored_design(run: GateRunPublic, views: Mapping[int, ChunkVersionPublic]) -> GateDesign:
    """The gate's design from its pool: one slot per slot number, its columns as versions."""
    columns = run.candidate_pool.columns
    slots = [
        stored_slot(number, [c for c in columns if c.slot == number], views)
        for number in sorted({c.slot for c in columns})
    ]
    return GateDesign(
        run.kind.value,  # type: ignore[arg-type]
        tuple(slots),
        mask_seed=run.mask_seed,
        split=run.split,
        budget=run.budget,
    )


def stored_slot(
    number: int, members: Sequence[PoolColumn], views: Mapping[int, ChunkVersionPublic]
) -> Slot:
    """Slot `number` (0-based in the pool, 1-based in the design), keyed by its first slug."""
    logical = views[members[0].chunk_version_id].slug
    versions = tuple(
        Version(
            version_id(views[c.chunk_version_id].slug, views[c.chunk_version_id].version),
            logical,
            c.kind.value,  # type: ignore[arg-type]
            number + 1,
        )
        for c in members
    )
    return Slot(logical, number + 1, versions)


def paired_observations(stored: Sequence[ObservationPublic]) -> list[PairedObservation]:
    return [
        PairedObservation(
            task_id=o.task_id,
            mask=tuple(o.inclusion),
            masked=o.masked.model_dump(),
            bare=o.bare.model_dump(),
            sample=o.sample_id,
        )
        for o in stored
    ]
