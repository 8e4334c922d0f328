"""A simulated policy with known per-chunk effects: a TEST DOUBLE of the policy backend.

`SimulatedPolicy` never runs a model. Each task has a bare success probability; a masked prompt
adds the true effects of the chunk versions it includes (a linear probability model), and the
strict reward is one Bernoulli draw per rollout, hash-seeded by (seed, task, sample, arm, mask).
It stands in for the agent runtime in three places: the statistical validation of the gate
(`benchmarks/gate_validation.py`), the fast validation test, and the gate service tests (through
`SimulatedRolloutRunner` in `services/evaluator/rollouts.py`).

With `clip=False` the model is exactly the gate's additive model, so the OLS coefficients are
unbiased for the true effects; with clipping near 0 or 1 (a strong policy) it is not, which is
the realistic case the validation also reports.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from services.evaluator.decision import decide
from services.evaluator.design import GateDesign, included_ids, mask_row
from services.evaluator.fit import COMPONENTS, PairedObservation
from shared.contracts.hashing import hash_uniform


@dataclass(frozen=True)
class SimulatedPolicy:
    """Test double: Bernoulli strict reward with additive, known per-version effects."""

    effects: Mapping[str, float]  # intervention id -> true effect on P(strict = 1)
    base_rate: Callable[[str], float]  # task id -> bare success probability
    seed: int = 0
    clip: bool = True  # clip probabilities into [0, 1]; False requires them to stay inside

    def success_probability(self, task_id: str, included: Sequence[str]) -> float:
        unknown = [vid for vid in included if vid not in self.effects]
        if unknown:
            raise KeyError(f"no true effect for {', '.join(unknown)}")
        probability = self.base_rate(task_id) + sum(self.effects[vid] for vid in included)
        if self.clip:
            return min(max(probability, 0.0), 1.0)
        if not 0.0 <= probability <= 1.0:
            raise ValueError(f"task {task_id}: probability {probability} outside [0, 1]")
        return probability

    def components(
        self, task_id: str, included: Sequence[str], *, sample: int = 0, arm: str = "masked"
    ) -> dict[str, float]:
        """The seven reward components of one rollout (strict is the Bernoulli draw)."""
        key = (self.seed, "sim", task_id, sample, arm, ",".join(included))
        strict = float(hash_uniform(*key, "strict") < self.success_probability(task_id, included))
        if strict:
            return dict.fromkeys(COMPONENTS, 1.0)
        # a failed purchase: partial credit, so the auxiliary fits have something to estimate
        r_type = float(hash_uniform(*key, "type") < 0.9)
        r_att = round(hash_uniform(*key, "att"), 3)
        r_option = float(hash_uniform(*key, "option") < 0.5)
        r_price = float(hash_uniform(*key, "price") < 0.8)
        return {
            "r_strict": 0.0,
            "r_success": 0.0,
            "r_type": r_type,
            "r_att": r_att,
            "r_option": r_option,
            "r_price": r_price,
            "r_loose": r_type * (r_att + r_option + r_price) / 3,
        }


class BaseRates:
    """Task-level bare success probabilities: a quantile function fed hash-seeded uniforms."""

    def __init__(self, quantile: Callable[[np.ndarray], np.ndarray], *, seed: int = 0) -> None:
        self.quantile = quantile
        self.seed = seed
        self._cache: dict[str, float] = {}

    def __call__(self, task_id: str) -> float:
        if task_id not in self._cache:
            uniform = np.array([hash_uniform(self.seed, "base", task_id)])
            self._cache[task_id] = float(self.quantile(uniform)[0])
        return self._cache[task_id]

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return np.asarray(self.quantile(rng.random(size)), dtype=float)


def uniform_base_rate(low: float, high: float, *, seed: int = 0) -> BaseRates:
    """Bare success probabilities uniform in [low, high]."""
    return BaseRates(lambda u: low + (high - low) * u, seed=seed)


def beta_base_rate(mean: float, concentration: float, *, seed: int = 0) -> BaseRates:
    """Beta(mean * c, (1 - mean) * c) bare success probabilities; a small c puts mass near 0 and
    1 (tasks the policy nearly always or never solves), which is what the reference gates show."""
    a, b = mean * concentration, (1 - mean) * concentration
    return BaseRates(lambda u: stats.beta.ppf(u, a, b), seed=seed)


def simulate_gate(
    design: GateDesign, policy: SimulatedPolicy, task_ids: Sequence[str], *, sample: int = 0
) -> list[PairedObservation]:
    """One gate's paired observations: a bare and a masked rollout per task."""
    observations = []
    for task_id in task_ids:
        mask = mask_row(design, task_id, sample)
        included = included_ids(design, mask)
        observations.append(
            PairedObservation(
                task_id=task_id,
                mask=mask,
                masked=policy.components(task_id, included, sample=sample, arm="masked"),
                bare=policy.components(task_id, (), sample=sample, arm="bare"),
                sample=sample,
            )
        )
    return observations


@dataclass
class ValidationTally:
    """Coverage, selection and sign counts per version, accumulated over replicates."""

    ids: tuple[str, ...]
    truth: tuple[float, ...]
    replicates: int = 0
    covered: np.ndarray = field(init=False)
    selected: np.ndarray = field(init=False)
    rejected: np.ndarray = field(init=False)  # the 95% interval excludes 0
    estimates: list[np.ndarray] = field(default_factory=list)
    standard_errors: list[np.ndarray] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.covered = np.zeros(len(self.ids))
        self.selected = np.zeros(len(self.ids))
        self.rejected = np.zeros(len(self.ids))

    def summary(self) -> dict[str, object]:
        r = max(self.replicates, 1)
        estimates = np.array(self.estimates)
        return {
            "replicates": self.replicates,
            "coverage_overall": float(self.covered.sum() / (r * len(self.ids))),
            "per_version": [
                {
                    "id": vid,
                    "true_effect": truth,
                    "coverage": float(self.covered[j] / r),
                    "selected_rate": float(self.selected[j] / r),
                    "rejection_rate": float(self.rejected[j] / r),
                    "mean_estimate": float(estimates[:, j].mean()) if len(estimates) else math.nan,
                    "sd_estimate": float(estimates[:, j].std(ddof=1))
                    if len(estimates) > 1
                    else math.nan,
                    "mean_hc3_se": float(np.mean([se[j] for se in self.standard_errors]))
                    if self.standard_errors
                    else math.nan,
                }
                for j, (vid, truth) in enumerate(zip(self.ids, self.truth, strict=True))
            ],
        }


def run_validation(
    design: GateDesign,
    effects: Mapping[str, float],
    base_rate: Callable[[str], float],
    *,
    n_tasks: int,
    replicates: int,
    seed: int = 0,
    clip: bool = False,
    level: float = 0.95,
    estimand: Mapping[str, float] | None = None,
) -> ValidationTally:
    """Replicate whole gates (fresh mask seed and outcomes each time) and tally the decisions.

    Coverage is counted against `estimand` when given (see `additive_estimand`), else against
    the true effects.
    """
    ids = design.column_ids
    target = effects if estimand is None else estimand
    tally = ValidationTally(ids, tuple(float(target[vid]) for vid in ids))
    task_ids = [f"task-{i:06d}" for i in range(n_tasks)]
    truth = np.array(tally.truth)
    for replicate in range(replicates):
        replicate_design = GateDesign(
            design.kind,
            design.slots,
            mask_seed=seed * 1_000_003 + replicate,
            split=design.split,
            budget=design.budget,
        )
        policy = SimulatedPolicy(effects, base_rate, seed=seed * 7919 + replicate, clip=clip)
        observations = simulate_gate(replicate_design, policy, task_ids)
        decision = decide(replicate_design, observations, level=level)
        fit = decision.fit.primary
        low, high = np.array(fit.ci_low), np.array(fit.ci_high)
        tally.covered += (low <= truth) & (truth <= high)
        tally.rejected += (low > 0) | (high < 0)
        kept = set(decision.selection.selected)
        tally.selected += np.array([vid in kept for vid in ids], dtype=float)
        tally.estimates.append(np.array(fit.coefficients))
        tally.standard_errors.append(np.array(fit.hc3_se))
        tally.replicates += 1
    return tally


def tasks_needed(
    effect: float, se_sqrt_n: float, *, alpha: float = 0.05, power: float = 0.8
) -> int:
    """Tasks for a two-sided level-alpha test to detect `effect` with the given power.

    `se_sqrt_n` is a coefficient's standard error times sqrt(n): the design- and noise-dependent
    constant a gate's SE shrinks from as 1/sqrt(n).
    """
    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)
    return math.ceil((z * se_sqrt_n / effect) ** 2)


def sign_probability(effect: float, se_sqrt_n: float, n_tasks: int) -> float:
    """P(beta_hat > 0) for a true effect: the chance a single gate keeps a useful chunk."""
    return float(stats.norm.cdf(effect / (se_sqrt_n / math.sqrt(n_tasks))))


def additive_estimand(
    design: GateDesign,
    effects: Mapping[str, float],
    base_rate: BaseRates,
    *,
    n_tasks: int = 200_000,
    seed: int = 0,
) -> dict[str, float]:
    """What the no-intercept OLS converges to under `SimulatedPolicy(clip=True)`.

    With clipping the additive model is misspecified, so the coefficients estimate the
    population least-squares projection of E[delta | task, mask] on the mask rather than the
    nominal effects. Computed from expected deltas (no Bernoulli noise) on many tasks with masks
    drawn from the design's distribution (uniform slot states).
    """
    rng = np.random.default_rng(seed)
    ids = design.column_ids
    truth = np.array([effects[vid] for vid in ids])
    columns = []
    for slot in design.slots:
        state = rng.integers(0, slot.n_states, n_tasks)
        if design.kind == "gate_a":
            state = rng.integers(0, 2, n_tasks)
        columns += [(state == k).astype(float) for k in range(1, slot.n_states)]
    matrix = np.column_stack(columns)
    base = base_rate.sample(rng, n_tasks)
    expected_delta = np.clip(base + matrix @ truth, 0.0, 1.0) - base
    projection = np.linalg.lstsq(matrix, expected_delta, rcond=None)[0]
    return dict(zip(ids, (float(value) for value in projection), strict=True))
