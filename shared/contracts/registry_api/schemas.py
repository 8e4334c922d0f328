"""Wire schemas of the SkillBank registry: what goes over HTTP, in both directions.

`XCreate` is a request body that makes an X, `XUpdate` a partial change, `XPublic` what the
registry returns. The registry's table models never leave the service; every service reads and
writes only these. Numbers are bounded and floats finite so that bad input is a 422 naming the
field, never a database error.
"""

from __future__ import annotations

import math
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Generic, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    StringConstraints,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError

from shared.contracts.chunks import ChunkContent, nfc, no_invisible
from shared.contracts.hashing import content_hash

MAX_ID = 2**31 - 1
MAX_PAGE = 500
MAX_OBSERVATIONS_PER_BATCH = 1000
MAX_POOL_COLUMNS = 64
MAX_GATE_TASKS = 100_000
# How deeply a free-form document (a card's `extras`, `privileged_audit`) may nest objects and
# arrays, the document itself being level 1. Far above what the analyst writes (about 5), far
# below what breaks a reader: the audit log stores a document inside two more levels, and the
# JSON encoder refuses past 254.
MAX_JSON_DEPTH = 32

# The reward components every gate observation carries, bare and masked (strict decides).
REWARD_COMPONENTS: tuple[str, ...] = (
    "r_strict",
    "r_success",
    "r_type",
    "r_att",
    "r_option",
    "r_price",
    "r_loose",
)
PRIMARY_COMPONENT = "r_strict"
GATE_ESTIMATOR = "paired_delta_ols_main_effects_no_intercept"


def _no_nul(value: str) -> str:
    # Postgres text cannot hold NUL; refuse it at the edge instead of failing in the database.
    if "\x00" in value:
        raise ValueError("text must not contain NUL characters")
    return value


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return _positive_zero(value)


def _positive_zero(value: float) -> float:
    # -0.0 + 0.0 is 0.0: one zero, so a value hashes and reads back alike on every database
    # (Postgres keeps -0.0 in a float column and SQLite does not; JSONB drops its sign).
    return value + 0.0


def unstorable(value: Any, loc: tuple[str | int, ...] = ()) -> tuple[tuple, str] | None:
    """Where in `value` (decoded JSON) is something no database stores alike, and why; or None.

    Postgres text holds no NUL, JSON has no NaN or Infinity (Python's decoder accepts them),
    and a lone UTF-16 surrogate (a JSON escape like \\ud800) is not encodable text.
    """
    if isinstance(value, str):
        if "\x00" in value:
            return loc, "text must not contain NUL characters"
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return loc, "text must not contain lone surrogates"
    elif isinstance(value, float):
        if not math.isfinite(value):
            return loc, "numbers must be finite"
    elif isinstance(value, dict):
        for key, item in value.items():
            problem = unstorable(key, (*loc, "(key)")) or unstorable(item, (*loc, str(key)))
            if problem:
                return problem
    elif isinstance(value, list):
        for index, item in enumerate(value):
            problem = unstorable(item, (*loc, index))
            if problem:
                return problem
    return None


def json_depth(value: Any) -> int:
    """Levels of nested objects and arrays in decoded JSON (a scalar is 0), without recursion:
    the value may be far deeper than the interpreter's recursion limit."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in _children(item))
    return deepest


def _children(item: dict | list) -> Any:
    return item.values() if isinstance(item, dict) else item


def _shallow(value: dict[str, Any]) -> dict[str, Any]:
    if json_depth(value) > MAX_JSON_DEPTH:
        raise ValueError(f"free-form JSON may nest at most {MAX_JSON_DEPTH} levels deep")
    return value


def _sorted_keys(value: Any) -> Any:
    # Free-form documents come back in one key order on every database (Postgres JSONB
    # reorders keys, SQLite keeps them as sent): same request, same bytes.
    if isinstance(value, dict):
        return {key: _sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted_keys(item) for item in value]
    if isinstance(value, float):
        return _positive_zero(value)
    return value


# Numbers and flags are strict: `true`, `"0.5"` or `"1"` where a number or flag belongs is a
# 422, not silently coerced (a float field still takes a JSON integer).
StrictInt = Annotated[int, Strict()]
StrictBool = Annotated[bool, Strict()]
Id = Annotated[int, Strict(), Field(ge=1, le=MAX_ID)]
Count = Annotated[int, Strict(), Field(ge=0, le=MAX_ID)]
Finite = Annotated[float, Strict(), AfterValidator(_finite)]
Probability = Annotated[float, Strict(), Field(ge=0.0, le=1.0), AfterValidator(_positive_zero)]
# A free-form document as read back (keys sorted); `FreeJsonIn` is one a client may send.
FreeJson = Annotated[dict[str, Any], AfterValidator(_sorted_keys)]
FreeJsonIn = Annotated[dict[str, Any], AfterValidator(_shallow), AfterValidator(_sorted_keys)]
Text = Annotated[
    str,
    StringConstraints(max_length=4000),
    AfterValidator(_no_nul),
    AfterValidator(nfc),
    AfterValidator(no_invisible),
]
# Text quoted as found (a firewall finding's match): kept exactly, invisible characters too,
# since they may be what the finding is about.
QuotedText = Annotated[
    str, StringConstraints(max_length=4000), AfterValidator(_no_nul), AfterValidator(nfc)
]
Name = Annotated[
    str, StringConstraints(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")
]
Label = Annotated[
    str,
    StringConstraints(min_length=1, max_length=200),
    AfterValidator(_no_nul),
    AfterValidator(nfc),
    AfterValidator(no_invisible),
]
Reason = Annotated[
    str,
    StringConstraints(min_length=1, max_length=2000),
    AfterValidator(_no_nul),
    AfterValidator(nfc),
    AfterValidator(no_invisible),
]
Hash = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
Binary = Annotated[int, Strict(), Field(ge=0, le=1)]


class Role(StrEnum):
    operator = "operator"
    trainer = "trainer"
    evaluator = "evaluator"
    analyst = "analyst"
    reader = "reader"


class ChunkSource(StrEnum):
    cold_start = "cold_start"
    analyst = "analyst"
    operator = "operator"


class BankStatus(StrEnum):
    draft = "draft"
    frozen = "frozen"
    retired = "retired"


class GateStatus(StrEnum):
    open = "open"
    complete = "complete"  # a final decision: every planned task paired
    incomplete = "incomplete"  # closed short of full coverage (maybe with a provisional decision)
    failed = "failed"


class GateKind(StrEnum):
    online = "online"  # interval gate: current slots, ADDs, replacement families; has a base bank
    gate_a = "gate_a"  # cold start: Bernoulli(1/2) over draft chunk versions; no base bank


class GateSolver(StrEnum):
    statsmodels = "statsmodels"
    reference = "reference"  # the reference run's Gauss-Jordan solver (bit-identical refits)


class DecisionStatus(StrEnum):
    selected = "selected"
    retired = "retired"
    rewrite_loser = "rewrite_loser"
    non_positive = "non_positive"
    budget_excluded = "budget_excluded"
    below_bound = "below_bound"  # beta > 0 but its lower bound <= 0 (gate.admit = lower_bound)


class PoolColumnKind(StrEnum):
    current = "current"
    add = "add"
    rewrite = "rewrite"
    draft = "draft"  # Gate A: a cold-start draft chunk version, in no bank yet


class CardOutcome(StrEnum):
    ADD = "ADD"
    REWRITE = "REWRITE"
    NO_PROPOSAL = "NO_PROPOSAL"


class CandidateOperation(StrEnum):
    ADD = "ADD"
    REWRITE = "REWRITE"


class CandidateStatus(StrEnum):
    proposed = "proposed"
    selected = "selected"
    rejected = "rejected"


class TreatmentMode(StrEnum):
    skill_free = "skill_free"
    assisted = "assisted"
    assisted_empty = "assisted_empty"


class RetryOutcome(StrEnum):
    pending = "pending"
    success = "success"  # the full skill solved it: an internalization deficit, no new chunk
    failure = "failure"  # goes to the failure analyst
    runtime_error = "runtime_error"


class AliasAction(StrEnum):
    create = "create"
    move = "move"
    rollback = "rollback"


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="wrap")
    @classmethod
    def _storable(cls, data: Any, handler: Any) -> Any:
        # Fields validate first (their errors name the field); what they let through that no
        # database stores alike (a lone surrogate, NaN in a free-form document) is caught here.
        model = handler(data)
        problem = unstorable(data)
        if problem:
            loc, message = problem
            error = PydanticCustomError("value_error", message)
            raise ValidationError.from_exception_data(
                cls.__name__, [InitErrorDetails(type=error, loc=loc, input="(not echoed)")]
            )
        return model


class _Out(BaseModel):
    model_config = ConfigDict(from_attributes=True)


T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """One page of a listing; `next_offset` is None on the last page."""

    items: list[T]
    total: int
    limit: int
    offset: int
    next_offset: int | None


# ---------------------------------------------------------------- chunks


class Provenance(_Wire):
    """Where a chunk version came from: the failure cards and the candidate behind it."""

    card_ids: list[Id] = Field(default_factory=list, max_length=1000)
    candidate_id: Id | None = None


class ChunkCreate(_Wire):
    slug: Name
    content: ChunkContent
    source: ChunkSource = ChunkSource.operator
    provenance: Provenance = Field(default_factory=Provenance)


class ChunkVersionCreate(_Wire):
    content: ChunkContent
    source: ChunkSource = ChunkSource.operator
    provenance: Provenance = Field(default_factory=Provenance)


class ChunkVersionPublic(_Out):
    id: int
    chunk_id: int
    slug: str
    version: int
    content: ChunkContent
    content_hash: str
    source: ChunkSource
    provenance: Provenance
    author: str
    created_at: datetime


class ChunkPublic(_Out):
    id: int
    slug: str
    created_by: str
    created_at: datetime
    latest: ChunkVersionPublic


# ---------------------------------------------------------------- banks


class BankEntryIn(_Wire):
    chunk_version_id: Id
    rho: Probability
    coefficient: Finite | None = None


class BankCreate(_Wire):
    """A new draft bank: explicit entries, or a copy of `from_bank_id` (rollback as a new draft)."""

    q: Probability = 0.2
    round: Count = 0
    parent_bank_id: Id | None = None
    gate_decision_id: Id | None = None
    from_bank_id: Id | None = None
    entries: list[BankEntryIn] = Field(default_factory=list, max_length=100)
    note: Text | None = None


class BankUpdate(_Wire):
    """A change to a draft bank; `entries`, when given, replaces the whole ordered list."""

    q: Probability | None = None
    round: Count | None = None
    parent_bank_id: Id | None = None
    gate_decision_id: Id | None = None
    entries: list[BankEntryIn] | None = Field(default=None, max_length=100)
    note: Text | None = None


class BankEntryPublic(_Out):
    position: int
    chunk_id: int
    slug: str
    version: int
    chunk_version_id: int
    rho: float
    coefficient: float | None
    content_hash: str
    content: ChunkContent


class BankPublic(_Out):
    """The bank document. Once frozen it never changes (strong ETag = `content_hash`), so the
    lifecycle status (which can still move to retired) lives in `BankSummary`, not here."""

    id: int
    q: float
    round: int
    parent_bank_id: int | None
    gate_decision_id: int | None
    note: str | None
    content_hash: str | None
    frozen_at: datetime | None
    created_by: str
    created_at: datetime
    entries: list[BankEntryPublic]


class BankSummary(_Out):
    id: int
    status: BankStatus
    q: float
    round: int
    parent_bank_id: int | None
    gate_decision_id: int | None
    content_hash: str | None
    n_entries: int
    created_by: str
    created_at: datetime
    frozen_at: datetime | None
    retired_at: datetime | None


class ChunkRef(_Out):
    chunk_id: int
    slug: str
    version: int
    chunk_version_id: int


class RewrittenChunk(_Out):
    chunk_id: int
    slug: str
    from_version: int
    to_version: int


class RhoChange(_Out):
    chunk_id: int
    slug: str
    from_rho: float
    to_rho: float


class BankDiff(_Out):
    """What changed from `from_bank_id` to `to_bank_id`, by logical chunk."""

    from_bank_id: int
    to_bank_id: int
    added: list[ChunkRef]
    retired: list[ChunkRef]
    rewritten: list[RewrittenChunk]
    rho_changes: list[RhoChange]
    order_changed: bool


class RenderedBank(_Out):
    bank_id: int
    inclusion: list[int]
    injected: list[ChunkRef]
    renderer: str
    text: str


class ChunkRetire(_Wire):
    """Operator: a new draft, child of the bank, without this logical chunk."""

    chunk_id: Id
    reason: Reason


class ChunkRestore(_Wire):
    """Operator: a new draft, child of the bank, with this chunk (latest version unless given)."""

    chunk_id: Id
    version: Annotated[int, Strict(), Field(ge=1, le=MAX_ID)] | None = None
    rho: Probability
    coefficient: Finite | None = None
    position: Annotated[int, Strict(), Field(ge=0, le=100)] | None = None
    reason: Reason


# ---------------------------------------------------------------- aliases


class AliasCreate(_Wire):
    name: Name
    bank_id: Id
    reason: Reason
    gate_decision_id: Id | None = None


class AliasMove(_Wire):
    bank_id: Id
    reason: Reason
    gate_decision_id: Id | None = None


class AliasRollback(_Wire):
    """Point the alias back at an earlier frozen bank (default: the one it pointed at before)."""

    bank_id: Id | None = None
    reason: Reason


class AliasPublic(_Out):
    name: str
    bank_id: int
    revision: int
    etag: str
    protected: bool
    updated_by: str
    updated_at: datetime


class AliasEventPublic(_Out):
    id: int
    alias: str
    revision: int
    action: AliasAction
    from_bank_id: int | None
    to_bank_id: int
    actor: str
    role: Role
    reason: str
    gate_decision_id: int | None
    created_at: datetime


# ---------------------------------------------------------------- gates


class PoolColumn(_Wire):
    """One column of the treatment matrix: a chunk version in a slot.

    Ordinary slots (current or ADD) hold one column; a replacement family is one slot whose
    columns are the old version and its rewrites, mutually exclusive in every mask. A Gate A
    pool holds only `draft` columns (cold-start versions), one per slot.
    """

    chunk_version_id: Id
    kind: PoolColumnKind
    slot: Annotated[int, Strict(), Field(ge=0, le=MAX_POOL_COLUMNS)]
    candidate_id: Id | None = None


class CandidatePool(_Wire):
    columns: list[PoolColumn] = Field(min_length=1, max_length=MAX_POOL_COLUMNS)


class GateIdentity(_Wire):
    """What every bare and masked rollout of a gate shares besides checkpoint, split and sample.

    The evaluator pairs two rollouts only when all of these agree; stored with the run, they say
    which model, decoding, prompt, environment and action protocol the coefficients are about.
    """

    model: Label
    decoding: Label = Field(description="fingerprint of the decoding settings")
    prompt_version: Label
    prompt_fingerprint: Label = Field(description="fingerprint of the prompt outside the skill")
    env_version: Label
    action_protocol: Label


class BareBaseline(_Wire):
    """Which bare rollouts B_i the masked ones are paired with.

    `plan_sha256` fingerprints what the bare runs must be (identity, checkpoint, split, sample,
    task ids, episode seeds); `records_sha256` pins reused bare records (None when the gate ran
    its own, whose outcomes are then in the observations).
    """

    source: Label = Field(description="'fresh' (run by this gate) or where reused ones came from")
    plan_sha256: Hash
    records_sha256: Hash | None = None


class GateRunCreate(_Wire):
    """Open a gate: its kind, design (pool, split, sample, mask seed, K, solver, task count) and
    the identity its rollouts share. An online gate names its frozen base bank; Gate A has none
    and its pool is cold-start drafts."""

    kind: GateKind = GateKind.online
    round: Count
    checkpoint_id: Name
    base_bank_id: Id | None = None
    candidate_pool: CandidatePool
    split: Name = "val"
    sample_id: Annotated[int, Strict(), Field(ge=0, le=1000)] = 0
    mask_seed: Annotated[int, Strict(), Field(ge=0, le=2**62)]
    budget: Annotated[int, Strict(), Field(ge=1, le=MAX_POOL_COLUMNS)] = 10
    solver: GateSolver = GateSolver.statsmodels
    n_tasks: Annotated[int, Strict(), Field(ge=1, le=MAX_GATE_TASKS)]
    identity: GateIdentity
    bare_baseline: BareBaseline
    note: Text | None = None


class GateRunUpdate(_Wire):
    """Close a gate without a decision (open -> incomplete | failed)."""

    status: GateStatus
    note: Text | None = None


class GateRunPublic(_Out):
    """A gate run. `identity`, `bare_baseline` and `n_tasks` are None only on runs recorded
    before the registry had those fields (migration 0002)."""

    id: int
    kind: GateKind
    round: int
    checkpoint_id: str
    base_bank_id: int | None
    candidate_pool: CandidatePool
    split: str
    sample_id: int
    mask_seed: int
    budget: int
    solver: GateSolver
    n_tasks: int | None
    identity: GateIdentity | None
    bare_baseline: BareBaseline | None
    status: GateStatus
    note: str | None
    n_observations: int
    decision_id: int | None
    created_by: str
    created_at: datetime


class RewardComponents(_Wire):
    r_strict: Finite
    r_success: Finite
    r_type: Finite
    r_att: Finite
    r_option: Finite
    r_price: Finite
    r_loose: Finite


class ObservationIn(_Wire):
    """One task's paired outcome: bare reward, masked reward, and the versions injected.

    `inclusion` has one 0/1 entry per pool column. `slot_states`, when given, has one entry per
    slot: 0 = absent, k = the slot's k-th column in pool order (for a family: 1 = old version,
    2.. = rewrites); it must agree with `inclusion`.
    """

    task_id: Label
    sample_id: Annotated[int, Strict(), Field(ge=0, le=1000)] = 0
    inclusion: list[Binary] = Field(max_length=MAX_POOL_COLUMNS)
    slot_states: list[Annotated[int, Strict(), Field(ge=0, le=MAX_POOL_COLUMNS + 1)]] | None = (
        Field(default=None, max_length=MAX_POOL_COLUMNS)
    )
    bare: RewardComponents
    masked: RewardComponents


class ObservationBatch(_Wire):
    observations: list[ObservationIn] = Field(min_length=1, max_length=MAX_OBSERVATIONS_PER_BATCH)


class ObservationPublic(_Out):
    id: int
    gate_run_id: int
    task_id: str
    sample_id: int
    inclusion: list[int]
    slot_states: list[int] | None
    bare: RewardComponents
    masked: RewardComponents
    created_at: datetime


class ObservationBatchResult(_Out):
    gate_run_id: int
    accepted: int
    n_observations: int


ComponentValues = Annotated[dict[str, Finite], Field(max_length=len(REWARD_COMPONENTS))]


class DecisionRowIn(_Wire):
    chunk_version_id: Id
    coefficients: ComponentValues
    rank: Annotated[int, Strict(), Field(ge=1, le=MAX_POOL_COLUMNS)] | None = None
    status: DecisionStatus
    hc3_se: ComponentValues | None = None
    ci_low: ComponentValues | None = None
    ci_high: ComponentValues | None = None


class DecisionCreate(_Wire):
    """The fitted coefficients and the selection for every column of the gate's pool.

    A final decision (the default) needs every planned task observed and completes the gate. A
    `provisional` one is the fit of an incomplete gate, kept for audit: it closes the gate as
    incomplete, settles no candidate, and no bank or alias move may cite it.
    """

    estimator: Label = GATE_ESTIMATOR
    primary_component: Label = PRIMARY_COMPONENT
    provisional: StrictBool = False
    rows: list[DecisionRowIn] = Field(min_length=1, max_length=MAX_POOL_COLUMNS)
    note: Text | None = None


class DecisionRowPublic(_Out):
    chunk_version_id: int
    chunk_id: int
    slug: str
    version: int
    kind: PoolColumnKind
    slot: int
    coefficients: dict[str, float]
    rank: int | None
    status: DecisionStatus
    hc3_se: dict[str, float] | None
    ci_low: dict[str, float] | None
    ci_high: dict[str, float] | None


class DecisionPublic(_Out):
    id: int
    gate_run_id: int
    estimator: str
    primary_component: str
    provisional: bool
    n_observations: int
    note: str | None
    rows: list[DecisionRowPublic]
    created_by: str
    created_at: datetime


# ---------------------------------------------------------------- cards and candidates


class FirewallFinding(_Wire):
    rule: Label
    text: QuotedText
    field: Label | None = None


class DeployableAbstraction(_Wire):
    """The part of a card that may reach a chunk: no gold, no ids (leak-checked when eligible)."""

    failure_mechanism: Text
    applicable_when: Text
    observable_trigger: Text
    corrective_procedure: Text
    verification_step: Text
    target_chunk_id: Id | None = None
    proposed_content: ChunkContent | None = None


class CardCreate(_Wire):
    round: Count
    task_id: Label
    checkpoint_id: Name | None = None
    evidence_id: Id | None = None
    outcome: CardOutcome
    eligible: StrictBool
    privileged_audit: FreeJsonIn = Field(default_factory=dict)
    deployable: DeployableAbstraction | None = None
    firewall_findings: list[FirewallFinding] = Field(default_factory=list, max_length=200)
    forced_no_proposal_reason: Text | None = None
    extras: FreeJsonIn = Field(default_factory=dict)


class CardPublic(_Out):
    """A failure card without its privileged audit (see `CardAuditPublic`). Gold stays there
    too: each firewall finding's `text` reads "[withheld: ...]", and a card with findings shows
    no `deployable`."""

    id: int
    round: int
    task_id: str
    checkpoint_id: str | None
    evidence_id: int | None
    outcome: CardOutcome
    eligible: bool
    deployable: DeployableAbstraction | None
    firewall_findings: list[FirewallFinding]
    forced_no_proposal_reason: str | None
    extras: FreeJson
    created_by: str
    created_at: datetime


class CardAuditPublic(_Out):
    """The gold-aware half of a card: its privileged audit, the firewall's findings with the
    text they matched, and its deployable abstraction as sent (blocked or not)."""

    card_id: int
    privileged_audit: FreeJson
    firewall_findings: list[FirewallFinding] = Field(default_factory=list)
    deployable: DeployableAbstraction | None = None


class CandidateCreate(_Wire):
    """A compiled ADD or REWRITE; the registry stores its content as a new chunk version."""

    round: Count
    operation: CandidateOperation
    target_chunk_id: Id | None = None
    slug: Name | None = None
    content: ChunkContent
    source_card_ids: list[Id] = Field(min_length=1, max_length=1000)
    failure_mechanism: Text | None = None
    proposal_checkpoint: Name | None = None

    def signature(self) -> str:
        """What makes two candidates the same (unique in the registry): the edit, not its
        provenance; the same text proposed for the same target is one candidate."""
        return content_hash(
            {
                "operation": self.operation.value,
                "target": self.target_chunk_id,
                "content": self.content.content_hash(),
            }
        )


class CandidatePublic(_Out):
    id: int
    round: int
    operation: CandidateOperation
    target_chunk_id: int | None
    chunk_id: int
    chunk_version_id: int
    version: int
    signature: str
    source_card_ids: list[int]
    failure_mechanism: str | None
    proposal_checkpoint: str | None
    status: CandidateStatus
    decision_id: int | None
    created_by: str
    created_at: datetime


# ---------------------------------------------------------------- trainer evidence


class Treatment(_Wire):
    mode: TreatmentMode
    inclusion: list[Binary] = Field(max_length=100)
    hash: Label | None = None


class EvidenceCreate(_Wire):
    """An all-wrong group: all siblings scored, none succeeded, sent to the slow loop."""

    task_id: Label
    round: Count
    step: Count
    group_index: Count
    treatment: Treatment
    bank_id: Id
    checkpoint_id: Name
    retry_outcome: RetryOutcome = RetryOutcome.pending
    retry_trace_uri: Text | None = None


class EvidenceUpdate(_Wire):
    """Record the full-skill retry's outcome (pending -> success | failure | runtime_error)."""

    retry_outcome: RetryOutcome
    retry_trace_uri: Text | None = None


class EvidencePublic(_Out):
    id: int
    task_id: str
    round: int
    step: int
    group_index: int
    treatment: Treatment
    bank_id: int
    checkpoint_id: str
    retry_outcome: RetryOutcome
    retry_trace_uri: str | None
    created_by: str
    created_at: datetime


class CheckpointCreate(_Wire):
    id: Name
    uri: Annotated[str, StringConstraints(min_length=1, max_length=1000), AfterValidator(_no_nul)]
    step: Count
    round: Count


class CheckpointPublic(_Out):
    id: str
    uri: str
    step: int
    round: int
    created_by: str
    created_at: datetime


# ---------------------------------------------------------------- audit


class AuditEntryPublic(_Out):
    id: int
    at: datetime
    actor: str
    role: Role
    action: str
    object_type: str
    object_id: str
    before: FreeJson | None
    after: FreeJson | None
