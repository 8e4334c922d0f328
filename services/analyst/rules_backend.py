"""The `rules` failure analyst: deterministic, offline, used in CI and in the demo.

For one failed full-skill retry it (1) reads the trace, (2) diagnoses every divergence from
the gold, (3) keeps those the current bank's procedures do not already cover, (4) picks the
earliest as the card's mechanism (ADD, or REWRITE when an active chunk is about the same
mechanism but is not followed), (5) tests that one repair with paired counterfactual
continuations (the retry replayed to the divergence, then a blind agent with the bank plus
the repair, and with the bank alone, on the same seeds: `live`),
and (6) writes the card. A card is verified by its own repair alone (no chain of others),
against the same continuations without it (`live.verify_repair`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from services.analyst.cards import finish_card
from services.analyst.counterfactual_trials import (
    PairedVerification,
    bank_chunks,
    default_tester,
    verify_repair,
)
from services.analyst.diagnosis import Divergence, diagnose
from services.analyst.mechanisms import LIBRARY, addressed_mechanisms
from services.analyst.trace import TraceFacts, gold_facts, gold_price, read_trace
from shared.contracts.chunks import ChunkContent, InjectedChunk, render_skill_block
from shared.contracts.registry_api.schemas import (
    BankEntryPublic,
    CardCreate,
    CardOutcome,
    DeployableAbstraction,
)
from shared.runtime.agent.backends.base import PolicyBackend
from shared.runtime.agent.backends.procedural import recognised_mechanisms
from shared.runtime.agent.runner import RolloutConfig
from shared.runtime.agent.trajectory import Trajectory
from shared.runtime.shopsim.env import ShopEnv


@dataclass(frozen=True)
class AnalysisInput:
    """Everything one analysis needs: the failed trace, its task, the active bank, the round."""

    env: ShopEnv
    trajectory: Trajectory
    bank: Sequence[BankEntryPublic]
    round: int
    checkpoint_id: str | None = None
    evidence_id: int | None = None
    cold_start: bool = False
    seed: int = 0
    prompt_version: str | None = None
    # The blind agent of the counterfactual trials: the round's frozen policy (the slow loop
    # passes it); None here means the procedural TEST DOUBLE (offline runs and tests).
    verifier: PolicyBackend | None = None
    rollout: RolloutConfig | None = None  # how trials run (turn cap, decoding); None: defaults
    pairs: int = 4  # k: continuations with the card's repair, and k without, same seeds

    def rollout_config(self) -> RolloutConfig:
        if self.rollout is not None:
            return replace(self.rollout, concurrency=1)
        extra = {"prompt_version": self.prompt_version} if self.prompt_version else {}
        return RolloutConfig(concurrency=1, **extra)


def verify(
    request: AnalysisInput, content: ChunkContent, target_chunk_id: int | None, branch_step: int
) -> PairedVerification:
    """The paired check of one card's own repair, by the request's blind agent."""
    agent = request.verifier or default_tester()
    return verify_repair(
        request.env, request.trajectory, request.bank, content,
        target_chunk_id=target_chunk_id, branch_step=branch_step, agent=agent,
        seed=request.seed, k=request.pairs, config=request.rollout_config(),
    )  # fmt: skip


def proposal_chunk(mechanism: str) -> InjectedChunk:
    return InjectedChunk(
        chunk_id=f"proposal-{mechanism}", version=1, content=LIBRARY[mechanism].template
    )


def analyze(request: AnalysisInput) -> CardCreate:
    """The card for one failed trace (see the module docstring)."""
    task = request.env.task(request.trajectory.task_id)
    facts = read_trace(request.trajectory)
    catalog = request.env.world.catalog
    gold = gold_facts(task, facts, price=gold_price(task, catalog), catalog=catalog)
    divergences = diagnose(request.trajectory, task, facts)
    followed = recognised_mechanisms(render_skill_block(bank_chunks(request.bank)))
    missing = [d for d in divergences if d.mechanism not in followed]
    audit = {**_audit(task, facts, divergences), "firewall_gold": gold.as_json()}
    common = {
        "round": request.round,
        "task_id": task.task_id,
        "checkpoint_id": request.checkpoint_id,
        "evidence_id": request.evidence_id,
        "gold": gold,
        "active": request.bank,
        "cold_start": request.cold_start,
    }
    extras = {"backend": "rules"}
    if not missing:
        audit["repair_validation_result"] = (
            "no divergence found" if not divergences else "the bank already covers every one"
        )
        return finish_card(
            outcome=CardOutcome.NO_PROPOSAL, audit=audit, deployable=None, verification=None,
            extras=extras, **common,
        )  # fmt: skip
    earliest = missing[0]
    target = _rewrite_target(request.bank, earliest.mechanism, request.cold_start)
    template = LIBRARY[earliest.mechanism]
    target_id = target.chunk_id if target else None
    verification = verify(request, template.template, target_id, earliest.step)
    audit["minimal_repair"] = {
        "mechanism": earliest.mechanism,
        "branch_step": earliest.step,
        "rewrite_target": target_id,
    }
    audit["repair_validation_result"] = verification.summary()
    deployable = DeployableAbstraction(
        failure_mechanism=template.failure_surface,
        applicable_when=template.template.applies_when,
        observable_trigger=template.trigger,
        corrective_procedure=" ".join(template.template.procedure),
        verification_step=template.template.verify,
        target_chunk_id=target.chunk_id if target else None,
        proposed_content=template.template,
    )
    return finish_card(
        outcome=CardOutcome.REWRITE if target else CardOutcome.ADD,
        audit=audit,
        deployable=deployable,
        verification=verification,
        extras={**extras, "mechanism": earliest.mechanism},
        **common,
    )


def _rewrite_target(
    bank: Sequence[BankEntryPublic], mechanism: str, cold_start: bool
) -> BankEntryPublic | None:
    """An active chunk about this mechanism that the policy does not follow: rewrite it."""
    if cold_start:
        return None
    return next((e for e in bank if mechanism in addressed_mechanisms(e.content)), None)


def _audit(task, facts: TraceFacts, divergences: list[Divergence]) -> dict:
    earliest = divergences[0] if divergences else None
    return {
        "gold_asin": task.gold_asin,
        "chosen_asin": facts.purchased,
        "failure_surface": earliest.failure_surface if earliest else None,
        "earliest_divergence": None
        if earliest is None
        else {
            "step": earliest.step,
            "mechanism": earliest.mechanism,
            "evidence": earliest.evidence,
        },
        "oracle_comparison": [
            {"step": d.step, "mechanism": d.mechanism, "evidence": d.evidence} for d in divergences
        ],
        "replay_evidence": {
            "queries": [query for _, query in facts.queries],
            "opened": [visit.product_id for visit in facts.visits],
            "selections": {axis: value for axis, (_, value) in facts.selections.items()},
            "blocked_buys": len(facts.blocked_buys),
        },
    }
