"""The evaluator service's wire schemas (requests and job documents)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from services.evaluator.decision import AdmitRule, EmptyBankPolicy
from services.evaluator.design import K_INIT
from services.evaluator.fit import Solver

Slug = Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")


class _GateJob(BaseModel):
    """What every gate job takes: the checkpoint, the tasks, the design knobs, adoption."""

    model_config = ConfigDict(extra="forbid")

    checkpoint_id: str = Slug
    alias: str = Field("current", min_length=1, max_length=64)
    task_ids: list[str] | None = Field(None, min_length=1, max_length=100_000)
    n_tasks: int | None = Field(None, ge=1, le=100_000, description="first n tasks of the split")
    mask_seed: int | None = Field(None, ge=0, le=2**62)
    max_retries: int | None = Field(None, ge=0, le=10)
    solver: Solver = "statsmodels"
    admit: AdmitRule = Field(
        "coefficient",
        description="coefficient: admit chunks with beta > 0 (the method); lower_bound: only "
        "those whose one-sided 95% HC3 lower bound is > 0 as well",
    )
    move_alias: bool = True
    empty_bank: EmptyBankPolicy | None = Field(
        None,
        description="no positive chunk: keep (no bank; alias stays) or adopt; default: settings",
    )
    bare_from_job: str | None = Field(
        None, max_length=80, description="reuse the bare rollouts of an earlier gate job"
    )


class GateJobCreate(_GateJob):
    """Run an interval gate on a frozen checkpoint: base bank (alias) + the round's candidates."""

    round: int = Field(ge=0, le=10_000)
    base_bank_id: int | None = Field(None, ge=1, description="default: the alias's bank")
    candidate_ids: list[int] | None = Field(
        None, max_length=64, description="default: the round's proposed candidates"
    )
    budget: int | None = Field(None, ge=1, le=64, description="K; default: the settings' K")


class GateAJobCreate(_GateJob):
    """Run Gate A (cold start) on the base checkpoint over cold-start draft chunk versions:
    Bernoulli(1/2) masks, positive top K_init, S_0 with rho from the Gate A coefficients."""

    draft_version_ids: list[int] = Field(
        min_length=1, max_length=64, description="cold-start chunk versions, in draft order"
    )
    round: int = Field(0, ge=0, le=10_000)
    budget: int = Field(K_INIT, ge=1, le=64, description="K_init")


class ConditionIn(BaseModel):
    """One evaluation condition: a checkpoint, and a bank (id or alias) or none (bare)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_./+-]+$")
    checkpoint_id: str = Slug
    bank_id: int | None = Field(None, ge=1)
    bank_alias: str | None = Field(None, min_length=1, max_length=64)
    sample: int = Field(
        0, ge=0, le=1000, description="sampling-seed index; another index is an A/A control"
    )


class EvalJobCreate(BaseModel):
    """Test-set evaluation: every condition on the same tasks, one rollout per task each."""

    model_config = ConfigDict(extra="forbid")

    # an experiment's arms x seeds x (bare, bank) fit in one job, paired on the same tasks
    conditions: list[ConditionIn] = Field(min_length=1, max_length=64)
    split: str = Field("test", min_length=1, max_length=32)
    task_ids: list[str] | None = Field(None, min_length=1, max_length=100_000)
    n_tasks: int | None = Field(None, ge=1, le=100_000)
    comparisons: list[tuple[str, str]] | None = Field(
        None, max_length=64, description="(a, b) pairs reported as a - b; default: the paper's"
    )
    resamples: int | None = Field(None, ge=100, le=1_000_000)
    seed: int | None = None
    max_retries: int | None = Field(None, ge=0, le=10)


class RefitCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gate_run_id: int = Field(ge=1)
    solver: Solver | None = None
    budget: int | None = Field(None, ge=1, le=64)
    admit: AdmitRule = "coefficient"
