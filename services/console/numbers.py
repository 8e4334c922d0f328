"""What the console's numbers mean: the per-row sample size behind a coefficient and the one
sentence per column the tables and plots explain themselves with."""

from __future__ import annotations

from shared.contracts.registry_api.client import RegistryClient
from shared.contracts.registry_api.schemas import GateRunPublic

# One line per column that carries a number, shown as the column's tooltip and in the legend
# under the table. The coefficient is a linear-probability effect: the fit regresses the
# per-task difference (masked minus bare reward, 0 or 1 for the strict reward) on the mask.
MEANINGS = {
    "coefficient": (
        "estimated change in the reward component (for r_strict: the probability of a strict "
        "success, 0 to 1) when this chunk is in the prompt, from the gate's paired OLS fit; "
        "+0.05 = five more successes per hundred tasks"
    ),
    "ci": "95% confidence interval of that change (HC3 robust standard errors)",
    "n": "paired observations (task samples) in which the gate's mask included this column",
    "rho": "probability that a training group's prompt includes this chunk (from its coefficient)",
    "q": "probability that a training group gets no skill block at all",
    "rank": "the column's place among the kept chunks (1 = largest coefficient)",
    "next_rho": "the inclusion probability it got in the bank built from this decision",
}


def included_counts(registry: RegistryClient, gate: GateRunPublic) -> dict[int, int]:
    """Per chunk version in the gate's pool: how many observations included it (the n behind
    its coefficient). Inclusion vectors follow the pool's column order."""
    columns = [column.chunk_version_id for column in gate.candidate_pool.columns]
    counts = dict.fromkeys(columns, 0)
    offset: int | None = 0
    while offset is not None:
        page = registry.observations_page(gate.id, limit=500, offset=offset)
        for observation in page.items:
            for version_id, included in zip(columns, observation.inclusion, strict=False):
                counts[version_id] += included
        offset = page.next_offset
    return counts


# What each gate verdict means, in the legend under the decision table and the plot.
VERDICTS = {
    "selected": "kept: strictly positive and within the budget of K chunks",
    "retired": "a current chunk not kept: it leaves the bank",
    "non_positive": "a new chunk (or rewrite winner) whose coefficient was not above zero",
    "rewrite_loser": "a version that lost to another version of the same chunk",
    "budget_excluded": "positive, but ranked below the K chunks the bank may hold",
    "below_bound": "positive, but its one-sided 95 % lower bound is not (gate.admit = lower_bound)",
}

COMPONENTS = {"r_strict": "P(strict success)", "r_success": "P(success)"}


def axis_title(component: str) -> str:
    """What a coefficient plot's axis measures (short enough for the plot's 470 px axis)."""
    return (
        f"change in {COMPONENTS.get(component, 'mean ' + component)} with the chunk in the prompt"
    )
