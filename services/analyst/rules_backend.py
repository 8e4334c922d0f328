"""The `rules` failure analyst: deterministic, offline, used in CI and in the demo.

For one failed full-skill retry it (1) reads the trace, (2) diagnoses every divergence from
the gold, (3) keeps those the current bank's procedures do not already cover, (4) picks the
earliest as the card's mechanism (ADD, or REWRITE when an active chunk is about the same
mechanism but is not followed), (5) tests the repair live with the procedural tester: first
the single repair, then the whole chain of repairs the trace needs, and (6) writes the card.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from services.analyst.cards import finish_card
from services.analyst.diagnosis import Divergence, diagnose
from services.analyst.live import Trial, live_trial
from services.analyst.mechanisms import LIBRARY, addressed_mechanisms
from services.analyst.trace import TraceFacts, gold_facts, gold_price, read_trace
from shared.agent.backends.procedural import recognised_mechanisms
from shared.agent.trajectory import Trajectory
from shared.chunks import InjectedChunk, render_skill_block
from shared.registry_api.schemas import (
    BankEntryPublic,
    CardCreate,
    CardOutcome,
    DeployableAbstraction,
)
from shared.shopsim.env import ShopEnv

MAX_TRIALS = 5  # live trials per analysis (the reference allows 19 live actions in 20 rounds)


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


def injected(bank: Sequence[BankEntryPublic]) -> list[InjectedChunk]:
    return [InjectedChunk(chunk_id=e.slug, version=e.version, content=e.content) for e in bank]


def proposal_chunk(mechanism: str) -> InjectedChunk:
    return InjectedChunk(
        chunk_id=f"proposal-{mechanism}", version=1, content=LIBRARY[mechanism].template
    )


def analyze(request: AnalysisInput) -> CardCreate:
    """The card for one failed trace (see the module docstring)."""
    task = request.env.task(request.trajectory.task_id)
    facts = read_trace(request.trajectory)
    gold = gold_facts(task, facts, price=gold_price(task, request.env.world.catalog))
    divergences = diagnose(request.trajectory, task, facts)
    followed = recognised_mechanisms(render_skill_block(injected(request.bank)))
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
    extras = {"backend": "rules", "live_tester": "procedural (test double)"}
    if not missing:
        audit["repair_validation_result"] = (
            "no divergence found" if not divergences else "the bank already covers every one"
        )
        return finish_card(
            outcome=CardOutcome.NO_PROPOSAL, audit=audit, deployable=None, trials=[],
            extras=extras, **common,
        )  # fmt: skip
    earliest = missing[0]
    target = _rewrite_target(request.bank, earliest.mechanism, request.cold_start)
    trials = _live_trials(request, missing, target)
    audit["minimal_repair"] = {
        "mechanism": earliest.mechanism,
        "chain": list(trials[-1].repair),
        "rewrite_target": target.chunk_id if target else None,
    }
    audit["repair_validation_result"] = (
        "terminal success" if any(t.success for t in trials) else "no terminal success"
    )
    template = LIBRARY[earliest.mechanism]
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
        trials=[t.as_dict() for t in trials],
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


def _live_trials(
    request: AnalysisInput, missing: list[Divergence], target: BankEntryPublic | None
) -> list[Trial]:
    """Follow the earliest repair live; while a trial fails, diagnose that trial's own trace
    and add the repair of its earliest new divergence, as an investigator would (bounded)."""
    base = [c for c, e in zip(injected(request.bank), request.bank, strict=True) if e is not target]
    task = request.env.task(request.trajectory.task_id)
    chain = [missing[0].mechanism]
    trials: list[Trial] = []
    for _ in range(MAX_TRIALS):
        chunks = [*base, *(proposal_chunk(mechanism) for mechanism in chain)]
        trial = live_trial(
            request.env,
            task.task_id,
            chunks,
            chain,
            seed=request.seed,
            prompt_version=request.prompt_version,
        )
        trials.append(trial)
        if trial.success or trial.trajectory is None:
            break
        followed = recognised_mechanisms(render_skill_block(chunks))
        found = diagnose(trial.trajectory, task, read_trace(trial.trajectory))
        following = [d.mechanism for d in found if d.mechanism not in followed]
        if not following:
            break
        chain = [*chain, following[0]]
    return trials


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
