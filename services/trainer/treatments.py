"""Group-consistent skill treatments: the curriculum state and hash-seeded draws.

One treatment per GRPO group, drawn like the reference's `SkillCurriculum.assign`:

    u(t) = first 8 bytes of sha256("{seed}:treatment:{step}:{group}:{t}") / 2**64
    skill-free       if u("skill-free") < q
    chunk j included if u("chunk:{j}") < rho_j      (otherwise)

so chunk j's marginal exposure is (1 - q) * rho_j. Every draw is a pure function of its
coordinates: a resumed run, an auditor and a test recompute the same masks without a generator.

Departure from the reference, on purpose: its uniforms are keyed on the curriculum state's
fingerprint (bank, q, rho) and a run-wide group counter. Ours are keyed on (run seed, rollout
step, group index within the step) only, so two runs with one seed draw the same uniforms for
the same group whatever their banks (common random numbers): only the comparison with q and rho
differs, and a run with a larger q is skill-free in every group where one with a smaller q is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from shared.contracts.hashing import content_hash, hash_uniform

Mode = Literal["skill_free", "assisted", "assisted_empty"]
MODES: tuple[Mode, ...] = ("skill_free", "assisted", "assisted_empty")


class InconsistentGroup(RuntimeError):
    """Siblings of one group differ in task, prompt, mask or curriculum state."""


@dataclass(frozen=True)
class CurriculumChunk:
    """One active chunk of the frozen bank with its inclusion probability."""

    chunk_id: int
    slug: str
    version: int
    content_hash: str
    rho: float


@dataclass(frozen=True)
class CurriculumState:
    """What fixes every treatment of an interval: frozen bank, q, rho per chunk, seed.

    `state_id` fingerprints all of it; episodes carry it, the registry stores it with each
    evidence row, and siblings must agree on it.
    """

    bank_id: int
    bank_hash: str
    q: float
    seed: int
    chunks: tuple[CurriculumChunk, ...]

    @property
    def state_id(self) -> str:
        return content_hash(
            {
                "bank_id": self.bank_id,
                "bank_hash": self.bank_hash,
                "q": self.q,
                "seed": self.seed,
                "chunks": [
                    [c.chunk_id, c.slug, c.version, c.content_hash, c.rho] for c in self.chunks
                ],
            }
        )

    @property
    def rhos(self) -> tuple[float, ...]:
        return tuple(chunk.rho for chunk in self.chunks)


@dataclass(frozen=True)
class Treatment:
    """A group's treatment: its mode and one 0/1 per chunk of the bank, in bank order."""

    mode: Mode
    inclusion: tuple[int, ...]


def chunk_key(chunk: CurriculumChunk) -> str:
    """The label of a chunk's draw: its logical id, so a rewrite keeps its coordinate."""
    return f"chunk:{chunk.chunk_id}"


def sample_treatment(state: CurriculumState, step: int, group: int) -> Treatment:
    """The treatment of group `group` of rollout step `step` under `state` (hash-seeded, no
    generator; the uniforms depend on the seed and the coordinates, never on the bank)."""
    coordinates = (state.seed, "treatment", step, group)
    if hash_uniform(*coordinates, "skill-free") < state.q:
        return Treatment("skill_free", tuple(0 for _ in state.chunks))
    inclusion = tuple(
        int(hash_uniform(*coordinates, chunk_key(chunk)) < chunk.rho) for chunk in state.chunks
    )
    return Treatment("assisted" if any(inclusion) else "assisted_empty", inclusion)


def check_group_consistent(siblings: Sequence[Mapping[str, object]]) -> None:
    """Raise `InconsistentGroup` unless every sibling shares task, prompt, mask and state.

    Each sibling is a mapping of the fields that must agree (task_id, state_id, inclusion,
    injected chunks, skill block hash, prompt fingerprint); the group's first sibling is the
    reference and the message names the first field that differs.
    """
    if not siblings:
        raise InconsistentGroup("a group needs at least one sibling")
    first = siblings[0]
    for index, sibling in enumerate(siblings[1:], 1):
        if set(sibling) != set(first):
            raise InconsistentGroup(f"sibling {index} records other fields than sibling 0")
        for field in first:
            if sibling[field] != first[field]:
                raise InconsistentGroup(
                    f"sibling {index} differs in {field}: {sibling[field]!r} vs {first[field]!r}"
                )
