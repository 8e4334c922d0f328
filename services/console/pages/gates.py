"""Gates: per round the decision table (status, coefficients with CIs, ranks, next rho), a
coefficient plot, and links to the evidence (raw observations, the evaluator's job)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from services.console.deps import Login, SettingsDep
from services.console.numbers import MEANINGS, VERDICTS, axis_title, included_counts
from services.console.pages.banks import all_banks
from services.console.plot import coefficient_plot
from services.console.views import render
from shared.contracts.evaluator_api.client import JOB_ROUTES, EvaluatorClient, EvaluatorError
from shared.contracts.registry_api.schemas import DecisionRowPublic

router = APIRouter()


@dataclass(frozen=True)
class DecisionLine:
    row: DecisionRowPublic
    coefficient: float | None
    ci: tuple[float, float] | None
    next_rho: float | None
    n: int  # observations whose mask included this column


@router.get("/gates")
def gates_index(request: Request, session: Login) -> Response:
    gates = sorted(session.registry.list_gate_runs(), key=lambda g: g.id, reverse=True)
    return render(request, "gates.html", session, gates=gates)


@dataclass(frozen=True)
class EvaluatorJobLink:
    id: str
    status: str
    url: str


def _evaluator_jobs(evaluator_url: str | None, gate_id: int, token: str) -> list[EvaluatorJobLink]:
    """The evaluator's jobs that recorded this gate run, read with the user's own token (the
    evaluator admits operators and readers); empty when not configured, not answering or
    refusing the token: the registry's record stands on its own. One quick try, no retries:
    the page must not wait on a link."""
    if not evaluator_url:
        return []
    links = []
    try:
        with EvaluatorClient(evaluator_url, token=token, timeout=3.0, retries=0) as evaluator:
            for kind in ("gate", "gate-a"):
                links += [
                    EvaluatorJobLink(
                        job.id, job.status, f"{evaluator.base_url}{JOB_ROUTES[kind]}/{job.id}"
                    )
                    for job in evaluator.list_jobs(kind)
                    if ((job.result or {}).get("registry") or {}).get("gate_run_id") == gate_id
                ]
    except (EvaluatorError, ValueError):  # ValueError: an answer that is not a job list
        return []
    return links


@router.get("/gates/{gate_id}")
def gate_page(request: Request, session: Login, settings: SettingsDep, gate_id: int) -> Response:
    registry = session.registry
    gate = registry.get_gate_run(gate_id)
    decision = registry.get_decision(gate.decision_id) if gate.decision_id else None
    lines, plot, next_bank = [], None, None
    if decision is not None:
        component = decision.primary_component
        next_bank = next(
            (b for b in all_banks(registry) if b.gate_decision_id == decision.id), None
        )
        rho = {}
        if next_bank is not None:
            rho = {e.chunk_version_id: e.rho for e in registry.get_bank(next_bank.id).entries}
        counts = included_counts(registry, gate)
        ordered = sorted(decision.rows, key=lambda r: (r.rank is None, r.rank or 0, r.slot))
        for row in ordered:
            ci = None
            if row.ci_low and row.ci_high and component in row.ci_low:
                ci = (row.ci_low[component], row.ci_high[component])
            coefficient = row.coefficients.get(component)
            lines.append(
                DecisionLine(
                    row,
                    coefficient,
                    ci,
                    rho.get(row.chunk_version_id),
                    counts.get(row.chunk_version_id, 0),
                )
            )
        plot = coefficient_plot(
            axis_title=axis_title(component),
            rows=[
                (
                    f"{line.row.slug} v{line.row.version}",
                    line.row.status.value,
                    line.coefficient or 0.0,
                    *(line.ci or (None, None)),
                )
                for line in lines
            ],
        )
    return render(
        request,
        "gate.html",
        session,
        gate=gate,
        decision=decision,
        lines=lines,
        plot=plot,
        next_bank=next_bank,
        jobs=_evaluator_jobs(settings.evaluator_url, gate_id, session.token),
        meanings=MEANINGS,
        verdicts=VERDICTS,
    )


@router.get("/gates/{gate_id}/observations")
def observations_page(
    request: Request, session: Login, gate_id: int, offset: Annotated[int, Query(ge=0)] = 0
) -> Response:
    registry = session.registry
    gate = registry.get_gate_run(gate_id)
    page = registry.observations_page(gate_id, limit=100, offset=offset)
    return render(request, "observations.html", session, gate=gate, page=page)
