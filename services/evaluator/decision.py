"""From a gate's observations to its decision: fit, select, next curriculum (one pure path).

`intraskill gate refit`, the gate service and the conformance test all go through `decide`, so
a stored decision can always be recomputed from its raw observations.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from services.evaluator.design import GateDesign, check_mask
from services.evaluator.fit import PRIMARY, GateFit, PairedObservation, Solver, fit_gate
from services.evaluator.selection import Selection, select
from shared.contracts.evaluator_api.schemas import AdmitRule
from shared.contracts.evaluator_api.schemas import EmptyBankPolicy as EmptyBankPolicy  # re-exported
from shared.contracts.inclusion import rho_from_coefficients

# the words of the wire contract (what each rule means is said there)
EMPTY_BANK_POLICIES: tuple[str, ...] = ("keep", "adopt")
ADMIT_RULES: tuple[str, ...] = ("coefficient", "lower_bound")


def json_safe(value: Any) -> Any:
    """`value` with every non-finite float (NaN, inf) replaced by None: strict JSON, which
    `json.dumps` would otherwise break with bare `NaN`."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    return value


@dataclass(frozen=True)
class GateDecision:
    design: GateDesign
    fit: GateFit
    selection: Selection
    next_rho: dict[str, float]  # keyed by the winning intervention id, bank order
    admit: AdmitRule = "coefficient"

    def as_json(self, *, intervals: bool = False) -> dict[str, object]:
        """The refit JSON: coefficients, aux_coefficients, selected, rank, status, next_rho;
        an undefined number (a NaN standard error, a mean of nothing) is null."""
        payload: dict[str, object] = {
            "admit": self.admit,
            "coefficients": self.fit.primary.coefficient_map(),
            "ci_low": dict(zip(self.fit.ids, self.fit.primary.ci_low, strict=True)),
            "ci_high": dict(zip(self.fit.ids, self.fit.primary.ci_high, strict=True)),
            "lower_bound": self.fit.primary.lower_bound_map(),
            "aux_coefficients": {
                name: fit.coefficient_map() for name, fit in self.fit.auxiliary().items()
            },
            "selected": list(self.selection.selected),
            "rank": self.selection.rank,
            "status": self.selection.status,
            "next_rho": self.next_rho,
        }
        if intervals:
            payload["intervals"] = {
                name: {
                    key: value
                    for key, value in fit.as_dict().items()
                    if key not in ("component", "coefficients")
                }
                for name, fit in self.fit.components.items()
            }
        return json_safe(payload)


def decide(
    design: GateDesign,
    observations: Sequence[PairedObservation],
    *,
    budget: int | None = None,
    level: float = 0.95,
    solver: Solver = "statsmodels",
    admit: AdmitRule = "coefficient",
) -> GateDecision:
    """Fit every component, select on the strict reward (admitting by `admit`), map kept
    coefficients to rho."""
    if admit not in ADMIT_RULES:
        raise ValueError(f"admit must be one of {', '.join(ADMIT_RULES)}, not {admit!r}")
    for observation in observations:
        check_mask(design, observation.mask)
    fit = fit_gate(design.column_ids, observations, level=level, solver=solver)
    primary = fit.components[PRIMARY]
    bounds = primary.lower_bound_map() if admit == "lower_bound" else None
    selection = select(design, primary.coefficient_map(), budget=budget, lower_bounds=bounds)
    kept = {entry.intervention_id: entry.coefficient for entry in selection.bank}
    rho = rho_from_coefficients(kept)
    return GateDecision(design, fit, selection, rho, admit)
