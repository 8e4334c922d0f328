"""A STAND-IN S_0, a TEST DOUBLE of the cold start and Gate A: four operator chunks with
hash-derived positive coefficients and the method's rho for them, frozen, behind an alias.

Two places need an S_0 where no cold start ran: the trainer on a fresh local registry
(`services/trainer/bank_resolution.py`) and the deploy smoke before its trainer Job
(`shared/apps/deploy/smoke/`). No figure of a run on it is the method's.
"""

from __future__ import annotations

from shared.contracts.chunks import ChunkContent
from shared.contracts.hashing import hash_uniform
from shared.contracts.inclusion import Q_SKILL_FREE, RHO_MAX, RHO_MIN, rho_from_coefficients
from shared.contracts.registry_api.client import RegistryClient

TOPICS = ("query", "options", "price", "verify")


def standin_chunk(topic: str) -> ChunkContent:
    return ChunkContent(
        title=f"Stand-in chunk: {topic}",
        applies_when=f"the task mentions its {topic} requirements",
        procedure=[f"check the {topic} requirement", "act on the matching option"],
        verify=f"the {topic} on the page matches the task",
        avoid=f"guessing the {topic}",
    )


def seed_standin_s0(
    operator: RegistryClient,
    *,
    alias: str,
    key: str,
    seeded_by: str,
    q: float = Q_SKILL_FREE,
    rho_min: float = RHO_MIN,
    rho_max: float = RHO_MAX,
) -> int:
    """The stand-in S_0's bank id, written with an operator's client and pointed at by `alias`.

    `key` (a run id) derives the coefficients and every write's idempotency key, so a rerun with
    it after a crash writes nothing twice; q and the rho bounds must be the trainer's config's.
    """
    coefficients = {}
    for index, topic in enumerate(TOPICS):
        chunk = operator.create_chunk(
            f"standin-{topic}", standin_chunk(topic), idempotency_key=f"{key}:s0:chunk:{index}"
        )
        coefficients[chunk.latest.id] = 0.01 + 0.05 * hash_uniform(key, topic)
    rho = rho_from_coefficients(coefficients, rho_min=rho_min, rho_max=rho_max)
    entries = [
        {"chunk_version_id": vid, "rho": rho[vid], "coefficient": coefficients[vid]}
        for vid in coefficients
    ]
    bank = operator.create_frozen_bank(
        entries,
        q=q,
        note=f"stand-in S_0 seeded by {seeded_by} (no cold start ran)",
        idempotency_key=f"{key}:s0:bank",
    )
    operator.create_alias(alias, bank.id, reason=f"stand-in S_0 seeded by {seeded_by}")
    return bank.id
