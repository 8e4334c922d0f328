"""Wire schemas of the analyst service (the slow loop): what the trainer and the demo send and
read over HTTP.

- `AllWrongGroupSubmit`: one normally scored all-wrong GRPO group. Submitting is idempotent on
  (run_id, round, step, group_index): the same body again returns the stored group (200), a
  different body under the same key is a 409.
- `CompileRoundCreate`: at a round's end, on the frozen checkpoint, run every pending group's
  full-skill retry, analyse the failed retries, compile <= 6 candidates. An async job.
- `ColdStartCreate`: Trace2Skill cold start (bare runs -> cards -> drafts -> Gate A -> S_0). An
  async job.
- `JobPublic`: the job document every job route returns (POST -> 202, GET polls).
- `FunnelCounts`: a round's slow-loop funnel, the reference's table.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

from shared.contracts.jobs import JobPublic as JobPublic  # re-exported: the job document
from shared.contracts.readiness import Readiness as Readiness  # re-exported: the /readyz body
from shared.contracts.registry_api.schemas import Name, StrictBool, StrictInt, Treatment

Slug = Annotated[
    str, StringConstraints(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")
]


# Text a service stores and echoes: no control character, no lone surrogate (which no answer
# could encode). Numbers and flags are strict, as the registry's: `true` is not a round.
def _storable(text: str) -> str:
    if any(ord(character) < 0x20 for character in text):
        raise ValueError("must not hold control characters")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode (a lone surrogate is not)") from None
    return text


Label = Annotated[str, StringConstraints(min_length=1, max_length=200), AfterValidator(_storable)]
Uri = Annotated[str, StringConstraints(min_length=1, max_length=1000), AfterValidator(_storable)]
TaskId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$")]
Hash = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
Count = Annotated[StrictInt, Field(ge=0, le=2**31 - 1)]
Id = Annotated[StrictInt, Field(ge=1, le=2**31 - 1)]


# The ShopSim presets a job may name. The runtime builds them (shared.runtime.shopsim.presets),
# and a contract imports nothing outside contracts, so the names are written here too; a test
# holds the two equal (tests/contracts/test_env_presets.py).
ENV_PRESETS = ("paper", "cpu", "test")


def _known_preset(name: str) -> str:
    if name not in ENV_PRESETS:
        raise ValueError(f"unknown ShopSim preset {name!r}; known: {', '.join(ENV_PRESETS)}")
    return name


EnvPreset = Annotated[str, AfterValidator(_known_preset)]

# Policy backends the analyst can run retries, live tests and bare runs with: the agent
# runtime's (`shared.runtime.agent.backends.make_backend`). `procedural` and `simulated` are test
# doubles, never models.
PolicyBackendName = Literal["transformers", "vllm", "openai", "procedural", "simulated"]
AnalystBackendName = Literal["rules", "llm"]
CompilerBackendName = Literal["deterministic", "llm"]
GroupStatus = Literal[
    "pending",  # recorded, waiting for the round's compile job
    "deficit",  # the full-skill retry succeeded: internalization deficit, no proposal
    "analyzed",  # the retry failed and the analyst wrote a card
    "runtime_error",  # the retry stayed unscored after the bounded reruns
    "analyst_error",  # the analyst crashed on every attempt (recorded, not a card)
]


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SiblingRef(_Wire):
    """One sibling of the group: its reward and where its trajectory lies (a trainer uri)."""

    reward: float = Field(ge=0.0, le=1.0)
    success: Literal[0] = 0
    trajectory_uri: Uri | None = None


class AllWrongGroupSubmit(_Wire):
    """A GRPO group whose siblings were all scored and none succeeded."""

    run_id: Slug
    round: Count
    step: Count
    group_index: Count
    task_id: TaskId
    split: Literal["train"] = "train"
    bank_id: Id
    bank_hash: Hash
    treatment: Treatment
    siblings: list[SiblingRef] = Field(min_length=1, max_length=64)
    evidence_id: Id | None = Field(None, description="the registry's evidence row, if recorded")
    checkpoint_id: Slug | None = Field(None, description="the checkpoint that made the siblings")

    def key(self) -> tuple[str, int, int, int]:
        """The idempotency key: one group per (run, round, step, group index)."""
        return (self.run_id, self.round, self.step, self.group_index)


class AllWrongGroupPublic(BaseModel):
    id: str
    request: AllWrongGroupSubmit
    status: GroupStatus
    retry_reward: float | None = None
    retry_trace_uri: str | None = None
    card_id: int | None = None
    card_outcome: str | None = None
    error: str | None = None
    created_at: str
    replayed: bool = False


class PolicySpec(_Wire):
    """Which frozen checkpoint acts, and through which runtime backend."""

    checkpoint_id: Slug
    weights_uri: Uri | None = Field(None, description="a checkpoint folder; in-process backends")
    backend: PolicyBackendName = "transformers"
    model: Label | None = Field(None, description="served model name (openai); default: uri")
    base_url: Uri | None = Field(None, description="openai-compatible server (openai backend)")

    @model_validator(mode="after")
    def _backend_needs(self) -> PolicySpec:
        if self.backend == "openai" and self.base_url is None:
            raise ValueError("backend openai needs base_url (the server that serves the policy)")
        return self


class CompileRoundCreate(_Wire):
    """Close a round's slow loop on the frozen checkpoint and bank."""

    run_id: Slug
    round: Count
    bank_id: Id = Field(description="the frozen bank the round trained under (S_t)")
    policy: PolicySpec
    env_preset: EnvPreset = "cpu"
    seed: StrictInt = Field(20260830, ge=0, le=2**62)
    analyst_backend: AnalystBackendName = "rules"
    compiler_backend: CompilerBackendName = "deterministic"
    max_candidates: StrictInt = Field(6, ge=0, le=6)


class ColdStartCreate(_Wire):
    """Trace2Skill cold start on the base checkpoint, ending (optionally) in Gate A and S_0."""

    run_id: Slug
    policy: PolicySpec
    env_preset: EnvPreset = "cpu"
    seed: StrictInt = Field(20260830, ge=0, le=2**62)
    n_tasks: StrictInt = Field(400, ge=1, le=100_000, description="bare runs on train tasks")
    analyst_backend: AnalystBackendName = "rules"
    max_drafts: StrictInt = Field(16, ge=1, le=16)
    gate_a: StrictBool = Field(True, description="run Gate A through the evaluator, register S_0")
    gate_a_tasks: StrictInt | None = Field(None, ge=1, le=100_000, description="default: all val")
    budget: StrictInt = Field(10, ge=1, le=10, description="K_init: S_0 keeps at most this many")
    alias: Name = Field("current", description="S_0 becomes it")
    gate_a_admit: Literal["coefficient", "lower_bound"] = Field(
        "coefficient",
        description="Gate A admits drafts with a coefficient > 0 (the method), or only those "
        "whose one-sided 95% HC3 lower bound is > 0",
    )


class FunnelCounts(BaseModel):
    """The slow loop's funnel for one round (the reference's table)."""

    run_id: str
    round: int
    all_wrong_groups: int = 0
    retries: int = 0
    deficits: int = 0
    runtime_errors: int = 0
    cards: int = 0
    verified: int = Field(0, description="cards whose own repair a counterfactual trial verified")
    eligible: int = 0
    candidates: int = 0
    # the compiler whose candidates these are: "deterministic", "llm", or
    # "llm->deterministic" when the llm compiler gave no valid answer and the deterministic ran
    compiler: str = "deterministic"


class CandidateSummary(BaseModel):
    """A compiled candidate as the compile job reports it."""

    candidate_id: int | None = Field(None, description="registry id, once registered")
    signature: str
    operation: Literal["ADD", "REWRITE"]
    target_chunk_id: int | None = None
    mechanism: str
    title: str
    source_card_ids: list[int] = Field(default_factory=list)


class CardVerification(BaseModel):
    """One card's paired check: `with` of `k` continuations succeeded with the card's repair,
    `without` of `k` on the same `seeds` without it (the card's `extras.verification`)."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    card_id: int
    kind: Literal["failure", "success"] = "failure"
    mechanism: str | None = None
    outcome: str
    eligible: bool
    verified: bool = Field(description="with >= 1 and with > without")
    with_repair: int = Field(alias="with", ge=0)
    without_repair: int = Field(alias="without", ge=0)
    k: int = Field(ge=1)
    seeds: list[int]
    branch_step: int | None = None


class CompileRoundResult(BaseModel):
    """A compile job's result: candidates, the cards behind them, the round's funnel."""

    candidate_ids: list[int] = Field(default_factory=list)
    candidates: list[CandidateSummary] = Field(default_factory=list)
    card_ids: list[int] = Field(default_factory=list)
    evidence_only_card_ids: list[int] = Field(default_factory=list)
    funnel: FunnelCounts
    verification: list[CardVerification] = Field(
        default_factory=list, description="the paired check of every card that proposed a repair"
    )
    compiler: dict = Field(
        default_factory=dict,
        description="backend asked for, backend used, attempts, fell_back, the answers' problems",
    )


class ColdStartResult(BaseModel):
    """A cold-start job's result: drafts registered, the Gate A job, S_0."""

    n_trajectories: int
    n_successes: int
    n_cards: int
    n_eligible: int
    n_verified: int = Field(0, description="cards whose repair passed the paired check")
    verification: list[CardVerification] = Field(
        default_factory=list, description="the paired check of every card that proposed a repair"
    )
    n_clusters: int = Field(0, description="clusters of eligible cards by proposed text")
    draft_version_ids: list[int] = Field(default_factory=list)
    draft_titles: list[str] = Field(default_factory=list)
    gate_a_job_id: str | None = None
    gate_a_status: Literal["not run", "complete", "incomplete"] = Field(
        "not run", description="incomplete: the gate job failed or timed out (no decision)"
    )
    gate_a_error: str | None = None
    s0_bank_id: int | None = None
    s0_size: int | None = Field(None, description="chunks Gate A kept (0: it kept none)")


