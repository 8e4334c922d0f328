"""Gate design: slots, replacement families, mask columns and hash-seeded masks.

Everything here is fixed before the first rollout. A gate's slots are one per current chunk
(a REWRITE target together with its new versions forms one replacement family) followed by one
per ADD candidate; the mask columns are every version, slot by slot. Masks are pure functions of
(mask seed, split, task, sample, slot), so any row can be recomputed and audited.

Key and draw, as the reference run used them (all 1,600 masks of the four public reference
gates are reproduced bit for bit, see tests/evaluator/test_design.py):

- online gate: state = first 8 bytes (big-endian) of sha256("{seed}:{split}:{task}:{sample}:{slot}")
  mod (number of versions + 1); state 0 = absent, state k = the k-th version (old first, then
  new versions by candidate id). `slot` is the logical chunk id; `sample` is the sample index (0).
- Gate A (cold start): each draft is present iff the same 8 bytes read as an integer are < 2**63.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from shared.contracts.evaluator_api.schemas import K_INIT as K_INIT  # the contract's default
from shared.contracts.hashing import hash_key

DEFAULT_MASK_SEED = 20260901
DEFAULT_BUDGET = 10  # K of an interval gate
DEFAULT_SPLIT = "val"

VersionKind = Literal["current", "add", "rewrite", "draft"]
GateKind = Literal["online", "gate_a"]

RANK_DEFICIENT_MESSAGE = "rank deficient: change the mask seed or add tasks"
LEVERAGE_MESSAGE = (
    "a task has leverage 1, so HC3 standard errors are undefined: add tasks or change the mask seed"
)
LEVERAGE_TOLERANCE = 1e-9


class DesignError(ValueError):
    """The gate cannot be designed as asked (bad slot layout, unknown rewrite target, ...).

    `field` names the request field at fault, when there is one (a service answers 422 with it).
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class RankDeficientError(DesignError):
    """The inclusion matrix does not identify every coefficient."""

    def __init__(self, message: str) -> None:
        super().__init__(message, field="task_ids")


@dataclass(frozen=True)
class Version:
    """One mask column: a chunk version that a masked prompt can include."""

    intervention_id: str
    logical_id: str
    kind: VersionKind
    order: int  # 1-based position of its slot in the gate

    @property
    def is_old(self) -> bool:
        return self.kind == "current"

    @property
    def is_candidate(self) -> bool:
        return self.kind in ("add", "rewrite", "draft")


@dataclass(frozen=True)
class Slot:
    """A logical position: absent, or exactly one of its versions (old first, then new ones)."""

    logical_id: str
    order: int
    versions: tuple[Version, ...]

    @property
    def n_states(self) -> int:
        return len(self.versions) + 1

    @property
    def is_family(self) -> bool:
        return len(self.versions) > 1


@dataclass(frozen=True)
class GateDesign:
    """The slots of one gate, its mask seed, split and budget."""

    kind: GateKind
    slots: tuple[Slot, ...]
    mask_seed: int = DEFAULT_MASK_SEED
    split: str = DEFAULT_SPLIT
    budget: int = DEFAULT_BUDGET
    columns: tuple[Version, ...] = field(init=False)

    def __post_init__(self) -> None:
        columns = tuple(version for slot in self.slots for version in slot.versions)
        ids = [version.intervention_id for version in columns]
        if not columns:
            raise DesignError("a gate needs at least one chunk version")
        if len(set(ids)) != len(ids):
            raise DesignError(f"duplicate intervention ids in the design: {_duplicates(ids)}")
        logical = [slot.logical_id for slot in self.slots]
        if len(set(logical)) != len(logical):
            raise DesignError(f"duplicate logical slot ids: {_duplicates(logical)}")
        if self.budget < 1:
            raise DesignError("budget K must be at least 1")
        if self.kind == "gate_a" and any(slot.is_family for slot in self.slots):
            raise DesignError("Gate A has no replacement families")
        object.__setattr__(self, "columns", columns)

    @property
    def column_ids(self) -> tuple[str, ...]:
        return tuple(version.intervention_id for version in self.columns)

    def version(self, intervention_id: str) -> Version:
        for version in self.columns:
            if version.intervention_id == intervention_id:
                return version
        raise KeyError(intervention_id)

    def slot_of(self, intervention_id: str) -> Slot:
        logical = self.version(intervention_id).logical_id
        return next(slot for slot in self.slots if slot.logical_id == logical)


def _duplicates(values: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    return sorted({value for value in values if value in seen or seen.add(value)})


def online_design(
    current: Sequence[str],
    *,
    adds: Sequence[str] = (),
    rewrites: Mapping[str, Sequence[str]] | None = None,
    mask_seed: int = DEFAULT_MASK_SEED,
    split: str = DEFAULT_SPLIT,
    budget: int = DEFAULT_BUDGET,
    current_versions: Mapping[str, str] | None = None,
    add_versions: Mapping[str, str] | None = None,
    candidate_key: Callable[[str], Any] | None = None,
) -> GateDesign:
    """An interval gate: current chunks in bank order (rewrite targets become families), then ADDs.

    `current` are the logical ids of the bank S_t in order; `rewrites` maps a current id to its
    new versions' intervention ids; `adds` are ADD logical ids. New versions and ADDs are placed
    in candidate order: `candidate_key` of their id (default: the id itself). By default a
    version's intervention id is its logical id (the reference's layout); `current_versions` /
    `add_versions` map a logical id to another intervention id (e.g. "slug@3").
    """
    rewrites = dict(rewrites or {})
    current_versions = dict(current_versions or {})
    add_versions = dict(add_versions or {})
    order_key = candidate_key or (lambda value: value)
    unknown = sorted(set(rewrites) - set(current))
    if unknown:
        raise DesignError(f"REWRITE target is not a current chunk: {', '.join(unknown)}")
    slots: list[Slot] = []
    for order, logical in enumerate(current, 1):
        versions = [Version(current_versions.get(logical, logical), logical, "current", order)]
        versions += [
            Version(new, logical, "rewrite", order)
            for new in sorted(rewrites.get(logical, ()), key=order_key)
        ]
        slots.append(Slot(logical, order, tuple(versions)))
    for order, logical in enumerate(sorted(adds, key=order_key), len(slots) + 1):
        version = Version(add_versions.get(logical, logical), logical, "add", order)
        slots.append(Slot(logical, order, (version,)))
    return GateDesign("online", tuple(slots), mask_seed=mask_seed, split=split, budget=budget)


def gate_a_design(
    drafts: Sequence[str],
    *,
    mask_seed: int = DEFAULT_MASK_SEED,
    split: str = DEFAULT_SPLIT,
    budget: int = DEFAULT_BUDGET,
    draft_versions: Mapping[str, str] | None = None,
) -> GateDesign:
    """The cold-start gate: one independent Bernoulli(1/2) slot per draft chunk, in draft order."""
    draft_versions = dict(draft_versions or {})
    slots = tuple(
        Slot(draft, order, (Version(draft_versions.get(draft, draft), draft, "draft", order),))
        for order, draft in enumerate(drafts, 1)
    )
    return GateDesign("gate_a", slots, mask_seed=mask_seed, split=split, budget=budget)


def design_from_columns(
    columns: Sequence[Mapping[str, object]],
    *,
    mask_seed: int = DEFAULT_MASK_SEED,
    split: str = DEFAULT_SPLIT,
    budget: int = DEFAULT_BUDGET,
    kind: GateKind = "online",
) -> GateDesign:
    """Rebuild a design from stored columns ({intervention_id, kind, logical_chunk_id, order}).

    The stored column order is kept as it is (it is the order of every stored mask vector); it must
    group each family's versions together, old first.
    """
    versions = [
        Version(
            str(column["intervention_id"]),
            str(column["logical_chunk_id"]),
            _kind(str(column["kind"])),
            int(column["order"]),  # type: ignore[call-overload]
        )
        for column in columns
    ]
    slots: list[Slot] = []
    for version in versions:
        if slots and slots[-1].logical_id == version.logical_id:
            last = slots[-1]
            if last.order != version.order:
                raise DesignError(f"versions of {version.logical_id} disagree on the slot order")
            slots[-1] = Slot(last.logical_id, last.order, (*last.versions, version))
        else:
            slots.append(Slot(version.logical_id, version.order, (version,)))
    for slot in slots:
        olds = [version for version in slot.versions if version.is_old]
        if slot.is_family and (len(olds) != 1 or slot.versions[0] is not olds[0]):
            raise DesignError(f"family {slot.logical_id} must list exactly one old version first")
    return GateDesign(kind, tuple(slots), mask_seed=mask_seed, split=split, budget=budget)


def _kind(value: str) -> VersionKind:
    aliases: dict[str, VersionKind] = {"candidate": "add"}
    kind = aliases.get(value, value)
    if kind not in ("current", "add", "rewrite", "draft"):
        raise DesignError(f"unknown column kind {value!r}")
    return kind  # type: ignore[return-value]


def _draw(mask_seed: int, split: str, task_id: str, sample: int, slot_id: str) -> int:
    """The 64-bit draw of one (task, sample, slot) cell."""
    return int.from_bytes(hash_key(mask_seed, split, task_id, sample, slot_id)[:8], "big")


def slot_state(design: GateDesign, slot: Slot, task_id: str, sample: int = 0) -> int:
    """0 = absent, k = the slot's k-th version is in the prompt."""
    draw = _draw(design.mask_seed, design.split, task_id, sample, slot.logical_id)
    if design.kind == "gate_a":
        return int(draw < 2**63)
    return draw % slot.n_states


def mask_row(design: GateDesign, task_id: str, sample: int = 0) -> tuple[int, ...]:
    """The 0/1 inclusion vector of one masked rollout, in column order."""
    row: list[int] = []
    for slot in design.slots:
        state = slot_state(design, slot, task_id, sample)
        row += [int(state == index) for index in range(1, slot.n_states)]
    return tuple(row)


def included_ids(design: GateDesign, mask: Sequence[int]) -> tuple[str, ...]:
    """The intervention ids a mask switches on, in column (bank) order."""
    if len(mask) != len(design.columns):
        raise DesignError(f"mask has {len(mask)} entries for {len(design.columns)} columns")
    return tuple(v.intervention_id for v, on in zip(design.columns, mask, strict=True) if on)


def check_mask(design: GateDesign, mask: Sequence[int]) -> None:
    """A mask is 0/1 and switches on at most one version per slot."""
    if len(mask) != len(design.columns):
        raise DesignError(f"mask has {len(mask)} entries for {len(design.columns)} columns")
    if any(value not in (0, 1) for value in mask):
        raise DesignError("mask entries must be 0 or 1")
    position = 0
    for slot in design.slots:
        width = len(slot.versions)
        if sum(mask[position : position + width]) > 1:
            raise DesignError(f"mask switches on two versions of {slot.logical_id}")
        position += width


def design_matrix(design: GateDesign, task_ids: Sequence[str], sample: int = 0) -> np.ndarray:
    """The n x p inclusion matrix of the masked rollouts of these tasks."""
    return np.array([mask_row(design, task, sample) for task in task_ids], dtype=float).reshape(
        len(task_ids), len(design.columns)
    )


def check_full_rank(matrix: np.ndarray) -> None:
    """Refuse a design whose no-intercept OLS would not identify every coefficient, or whose
    HC3 errors would be undefined.

    HC3 divides each squared residual by (1 - h_i)^2, h_i the task's leverage (the diagonal of
    X (X'X)^-1 X'). A task with leverage 1 (its mask pattern alone pins a coefficient: small
    gates, e.g. 4 drafts on 8 tasks) makes every error NaN, so such a design is refused here,
    before any rollout, like a rank-deficient one.
    """
    n, p = matrix.shape
    if n <= p or int(np.linalg.matrix_rank(matrix)) < p:
        raise RankDeficientError(
            f"{RANK_DEFICIENT_MESSAGE} ({n} tasks, {p} columns, "
            f"rank {int(np.linalg.matrix_rank(matrix)) if n else 0})"
        )
    leverage = task_leverage(matrix)
    pinned = [int(i) for i in np.flatnonzero(leverage > 1.0 - LEVERAGE_TOLERANCE)]
    if pinned:
        raise RankDeficientError(
            f"{LEVERAGE_MESSAGE} ({n} tasks, {p} columns; rows with leverage 1: "
            f"{pinned[:10]}{' ...' if len(pinned) > 10 else ''})"
        )


def task_leverage(matrix: np.ndarray) -> np.ndarray:
    """Each row's leverage h_i = x_i' (X'X)^-1 x_i (X of full column rank)."""
    inverse = np.linalg.inv(matrix.T @ matrix)
    return np.einsum("ij,jk,ik->i", matrix, inverse, matrix)
