"""The evaluator service's wire contract: its request bodies, the job document it answers
with, and the words its answers use (the trainer, analyst, console, demo and experiment read
these over HTTP; none imports the evaluator).

Strict as the registry's: a number or flag must be sent as one (`"yes"`, `1` or `true` where
the other belongs is a 422, not coerced), an alias or checkpoint is a slug (it becomes part of
a registry URL), a task id is plain ASCII, a split is one the world has."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from shared.contracts.jobs import JobPublic as JobPublic  # re-exported: the job document
from shared.contracts.registry_api.schemas import Name, StrictBool, StrictInt

# The `type` of a 422 detail item when a gate's random mask design cannot identify every
# coefficient with defined HC3 errors (rank deficient, or a task of leverage 1). The request
# is sound: another mask seed, or more tasks, gives another design.
DESIGN_NOT_IDENTIFIED = "design_not_identified"

# What a complete gate does when no chunk has a positive coefficient (the selected bank would be
# empty): `keep` stores the decision but creates no bank and leaves the alias where it is;
# `adopt` creates the empty bank and moves the alias to it. Either way the outcome says so.
EmptyBankPolicy = Literal["keep", "adopt"]
# Which chunks a gate may admit: "coefficient" (the method: beta > 0) or "lower_bound" (beta > 0
# and its one-sided 95 % HC3 lower bound > 0: only effects the gate is sure of).
AdmitRule = Literal["coefficient", "lower_bound"]
# "statsmodels": the coefficients of statsmodels' OLS (pinv). "reference": the reference run's
# solver, Gauss-Jordan with partial pivoting on the normal equations summed in task order; it
# reproduces the published coefficients bit for bit (statsmodels agrees with it to ~2e-16), so
# a refit can reproduce published rho values exactly. Both report statsmodels' HC3 errors.
Solver = Literal["statsmodels", "reference"]
K_INIT = 10  # K of Gate A (the method's K_init; its design range is 8-12)

Slug = Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")
TaskId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$")]
Split = Literal["train", "val", "test"]
ConditionName = Annotated[
    str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_./+-]+$")
]
JobId = Annotated[str, StringConstraints(pattern=r"^[a-z0-9-]{1,80}$")]


class _GateJob(BaseModel):
    """What every gate job takes: the checkpoint, the tasks, the design knobs, adoption."""

    model_config = ConfigDict(extra="forbid")

    checkpoint_id: str = Slug
    alias: Name = "current"
    task_ids: list[TaskId] | None = Field(None, min_length=1, max_length=100_000)
    n_tasks: StrictInt | None = Field(
        None, ge=1, le=100_000, description="first n tasks of the split"
    )
    mask_seed: StrictInt | None = Field(None, ge=0, le=2**62)
    max_retries: StrictInt | None = Field(None, ge=0, le=10)
    solver: Solver = "statsmodels"
    admit: AdmitRule = Field(
        "coefficient",
        description="coefficient: admit chunks with beta > 0 (the method); lower_bound: only "
        "those whose one-sided 95% HC3 lower bound is > 0 as well",
    )
    move_alias: StrictBool = True
    empty_bank: EmptyBankPolicy | None = Field(
        None,
        description="no positive chunk: keep (no bank; alias stays) or adopt; default: settings",
    )
    bare_from_job: JobId | None = Field(
        None, max_length=80, description="reuse the bare rollouts of an earlier gate job"
    )


class GateJobCreate(_GateJob):
    """Run an interval gate on a frozen checkpoint: base bank (alias) + the round's candidates."""

    round: StrictInt = Field(ge=0, le=10_000)
    base_bank_id: StrictInt | None = Field(None, ge=1, description="default: the alias's bank")
    candidate_ids: list[StrictInt] | None = Field(
        None, max_length=64, description="default: the round's proposed candidates"
    )
    budget: StrictInt | None = Field(None, ge=1, le=64, description="K; default: the settings' K")


class GateAJobCreate(_GateJob):
    """Run Gate A (cold start) on the base checkpoint over cold-start draft chunk versions:
    Bernoulli(1/2) masks, positive top K_init, S_0 with rho from the Gate A coefficients."""

    draft_version_ids: list[StrictInt] = Field(
        min_length=1, max_length=64, description="cold-start chunk versions, in draft order"
    )
    round: StrictInt = Field(0, ge=0, le=10_000)
    budget: StrictInt = Field(K_INIT, ge=1, le=64, description="K_init")


class ConditionIn(BaseModel):
    """One evaluation condition: a checkpoint, and a bank (id or alias) or none (bare)."""

    model_config = ConfigDict(extra="forbid")

    name: ConditionName
    checkpoint_id: str = Slug
    bank_id: StrictInt | None = Field(None, ge=1)
    bank_alias: Name | None = None
    sample: StrictInt = Field(
        0, ge=0, le=1000, description="sampling-seed index; another index is an A/A control"
    )


class EvalJobCreate(BaseModel):
    """Test-set evaluation: every condition on the same tasks, one rollout per task each."""

    model_config = ConfigDict(extra="forbid")

    # an experiment's arms x seeds x (bare, bank) fit in one job, paired on the same tasks
    conditions: list[ConditionIn] = Field(min_length=1, max_length=64)
    split: Split = "test"
    task_ids: list[TaskId] | None = Field(None, min_length=1, max_length=100_000)
    n_tasks: StrictInt | None = Field(None, ge=1, le=100_000)
    comparisons: list[tuple[ConditionName, ConditionName]] | None = Field(
        None, max_length=64, description="(a, b) pairs reported as a - b; default: the paper's"
    )
    resamples: StrictInt | None = Field(None, ge=100, le=1_000_000)
    seed: StrictInt | None = None
    max_retries: StrictInt | None = Field(None, ge=0, le=10)


class RefitCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gate_run_id: StrictInt = Field(ge=1)
    solver: Solver | None = None
    budget: StrictInt | None = Field(None, ge=1, le=64)
    admit: AdmitRule = "coefficient"
