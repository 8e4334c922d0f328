"""Review queue: the latest round's candidates and failure cards with their verification and
firewall status; a card's firewall findings and privileged (gold-aware) audit only for the
roles the registry lets read that audit."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from services.console.deps import Login
from services.console.pages.banks import gate_of_decision
from services.console.views import render
from shared.contracts.registry_api.client import RegistryClient
from shared.contracts.registry_api.schemas import CandidatePublic

router = APIRouter()


@router.get("/review")
def review_queue(
    request: Request, session: Login, round: Annotated[int | None, Query(ge=0)] = None
) -> Response:
    registry = session.registry
    if round is None:
        rounds = [c.round for c in registry.list_candidates()] + [
            c.round for c in registry.list_cards()
        ]
        round = max(rounds, default=0)
    candidates = registry.list_candidates(round=round)
    cards = registry.list_cards(round=round)
    # The registry withholds what the firewall matched from every list; the privileged roles
    # read it from each blocked card's audit, one request per blocked card.
    findings = {
        card.id: registry.get_card_audit(card.id).firewall_findings
        for card in cards
        if card.firewall_findings and session.sees_privileged_audit
    }
    return render(
        request,
        "review.html",
        session,
        round=round,
        candidates=candidates,
        cards=cards,
        findings=findings,
        slugs=_slugs(registry, candidates),
        gate_of=gate_of_decision(registry),
    )


def _slugs(registry: RegistryClient, candidates: list[CandidatePublic]) -> dict[int, str]:
    """The slug of every chunk the candidates store or rewrite (ids alone say nothing)."""
    ids = {c.chunk_id for c in candidates} | {c.target_chunk_id for c in candidates}
    return {i: registry.get_chunk(i).slug for i in ids if i is not None}


@router.get("/cards/{card_id}")
def card_page(request: Request, session: Login, card_id: int) -> Response:
    registry = session.registry
    card = registry.get_card(card_id)
    # Asked for only where the registry would answer it: a reader's page never holds gold.
    audit = registry.get_card_audit(card_id) if session.sees_privileged_audit else None
    evidence = registry.get_evidence(card.evidence_id) if card.evidence_id else None
    return render(request, "card.html", session, card=card, audit=audit, evidence=evidence)


@router.get("/candidates/{candidate_id}")
def candidate_page(request: Request, session: Login, candidate_id: int) -> Response:
    registry = session.registry
    candidate = registry.get_candidate(candidate_id)
    version = registry.get_chunk_version_by_id(candidate.chunk_version_id)
    target = registry.get_chunk(candidate.target_chunk_id) if candidate.target_chunk_id else None
    return render(
        request,
        "candidate.html",
        session,
        candidate=candidate,
        version=version,
        target=target,
        gate_of=gate_of_decision(registry),
    )
