"""Failure cards: one trajectory-local hypothesis, with the privileged audit (gold allowed) kept
apart from the deployable abstraction (what may reach a chunk), and the rules that force
NO_PROPOSAL.

The card is the registry's `CardCreate`, the shared contract: the analyst fills it, the
registry stores the audit where only privileged readers see it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from services.analyst.counterfactual_trials import PairedVerification, verifying_trial
from shared.contracts.analyst_api.schemas import CardVerification
from shared.contracts.chunks import ChunkContent
from shared.contracts.registry_api.schemas import (
    BankEntryPublic,
    CardCreate,
    CardOutcome,
    DeployableAbstraction,
    FirewallFinding,
)
from shared.runtime.leak import GoldFacts, find_leaks

DEPLOYABLE_TEXT_FIELDS = (
    "failure_mechanism",
    "applicable_when",
    "observable_trigger",
    "corrective_procedure",
    "verification_step",
)


def deployable_texts(deployable: DeployableAbstraction) -> dict[str, str]:
    """Every deployable text of a card, by field (the proposed chunk's fields included)."""
    texts = {name: getattr(deployable, name) for name in DEPLOYABLE_TEXT_FIELDS}
    if deployable.proposed_content is not None:
        texts.update(chunk_texts(deployable.proposed_content, prefix="proposed_content."))
    return texts


def chunk_texts(content: ChunkContent, *, prefix: str = "") -> dict[str, str]:
    texts = {
        f"{prefix}title": content.title,
        f"{prefix}applies_when": content.applies_when,
        f"{prefix}verify": content.verify,
        f"{prefix}avoid": content.avoid,
    }
    texts.update({f"{prefix}procedure.{i}": step for i, step in enumerate(content.procedure)})
    return texts


def firewall(texts: dict[str, str], gold: GoldFacts | None) -> list[FirewallFinding]:
    """The gold firewall over every deployable text, findings named by field."""
    return [
        FirewallFinding(rule=finding.rule, text=finding.text[:4000], field=name)
        for name, text in texts.items()
        for finding in find_leaks(text, gold=gold)
    ]


def forced_no_proposal_reason(
    *,
    outcome: CardOutcome,
    verification: PairedVerification | None,
    target_chunk_id: int | None,
    active: Sequence[BankEntryPublic],
    cold_start: bool,
    findings: Sequence[FirewallFinding],
) -> str | None:
    """Why a proposal must become NO_PROPOSAL (the method's rules, with the paired check), or
    None when it stands."""
    if outcome == CardOutcome.NO_PROPOSAL:
        return None
    if verification is None or not verification.with_trials:
        return "no counterfactual trial of the card's own repair"
    if not any(trial.valid_actions > 0 for trial in verification.with_trials):
        return "no valid action by the blind agent after the branch"
    with_card, without_card = verification.with_successes, verification.without_successes
    k = len(verification.seeds)
    if with_card == 0:
        return f"no continuation with the card's repair reached R_success = 1 (0 of {k})"
    if not verification.verified:
        return (f"the repair did not beat its absence: {with_card} of {k} continuations "
                f"succeeded with it, {without_card} of {k} without")  # fmt: skip
    if outcome == CardOutcome.REWRITE:
        if cold_start:
            return "REWRITE is not allowed at cold start"
        if target_chunk_id not in {entry.chunk_id for entry in active}:
            return f"REWRITE target {target_chunk_id} is not an active chunk"
    if findings:
        return f"gold firewall: {findings[0].rule} in {findings[0].field}"
    return None


def finish_card(
    *,
    round: int,
    task_id: str,
    checkpoint_id: str | None,
    evidence_id: int | None,
    outcome: CardOutcome,
    audit: dict[str, Any],
    deployable: DeployableAbstraction | None,
    gold: GoldFacts | None,
    verification: PairedVerification | None,
    active: Sequence[BankEntryPublic],
    cold_start: bool,
    extras: dict[str, Any],
) -> CardCreate:
    """A card with its firewall findings and forced outcome applied; eligible iff it still
    proposes something and the firewall found nothing. `verification` is the paired check of
    the card's own repair (`live`), never the analyst's own diagnostic actions."""
    findings = firewall(deployable_texts(deployable), gold) if deployable else []
    reason = forced_no_proposal_reason(
        outcome=outcome,
        verification=verification,
        target_chunk_id=deployable.target_chunk_id if deployable else None,
        active=active,
        cold_start=cold_start,
        findings=findings,
    )
    if reason is not None:
        outcome = CardOutcome.NO_PROPOSAL
    return CardCreate(
        round=round,
        task_id=task_id,
        checkpoint_id=checkpoint_id,
        evidence_id=evidence_id,
        outcome=outcome,
        eligible=outcome != CardOutcome.NO_PROPOSAL and not findings,
        privileged_audit=audit,
        deployable=deployable,
        firewall_findings=findings,
        forced_no_proposal_reason=reason,
        extras={**extras, **verification_extras(verification)},
    )


def verification_extras(verification: PairedVerification | None) -> dict[str, Any]:
    """What a card stores of its paired check: the counts, k and seeds (`verification`), every
    continuation (`terminal_trials`, both arms) and, when verified, its first success with the
    repair (`verifying_trial`)."""
    if verification is None:
        return {"verification": None, "terminal_trials": [], "verifying_trial": None}
    trials = verification.trial_records()
    return {
        "verification": verification.summary(),
        "terminal_trials": trials,
        "verifying_trial": verifying_trial(trials) if verification.verified else None,
    }


def card_verification(card_id: int, card: CardCreate) -> CardVerification | None:
    """The summaries' record of a stored card's paired check (None: its repair was never
    checked, e.g. no divergence to repair)."""
    checked = (card.extras or {}).get("verification")
    if not checked:
        return None
    return CardVerification(
        card_id=card_id,
        kind="success" if card.extras.get("kind") == "success" else "failure",
        mechanism=card.extras.get("mechanism"),
        outcome=card.outcome.value,
        eligible=card.eligible,
        **{key: checked[key] for key in ("verified", "with", "without", "k", "seeds")},
        branch_step=checked.get("branch_step"),
    )
