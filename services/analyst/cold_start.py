"""The cold start (Trace2Skill): from bare trajectories to a small, gated initial bank S_0.

1. Bare runs of the base policy on train tasks (no skill block).
2. Success cards (read without gold; at most two per trajectory: the library mechanisms the
   trajectory's decisive behaviour shows) and failure cards (the failure analyst, REWRITE not
   allowed). Both pass the same paired check and firewall (`cards.finish_card`): a success
   card's branch is the step where the trajectory first showed the behaviour, replayed up to
   there, then k continuations with the card's chunk and k without, on the same seeds.
3. Consolidation by what the cards propose: every eligible card's deployable chunk text is
   embedded (all-MiniLM-L6-v2, the model the compiler's dedupe ships) and clustered
   (average-link cosine, texts at least `CLUSTER_SIMILARITY` alike together) in batches of
   40 cards with at most 12 clusters each; batch clusters then merge by their centroids.
   Cards of any backend take part, whatever mechanism name they carry, if any.
4. At most 16 drafts, one per cluster (its most proposed text), in the workflow skeleton's
   order (query, persona, candidate inspection, variant and price verification, then the
   rest by support), registered as cold-start chunks. Idempotency keys derive from the
   content fingerprint, so a resumed run finds its drafts instead of making new ones.
5. Gate A in the evaluator over HTTP (Bernoulli(1/2) masks, positive top K_init <= 10), which
   registers and freezes S_0 and moves `current`. A Gate A that did not finish (the job
   failed, or the registry's record of the gate run is not `complete`) is reported as
   incomplete (`gate_a_status`), never as a gate that kept nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from sklearn.cluster import AgglomerativeClustering

from services.analyst.cards import card_verification, finish_card
from services.analyst.mechanisms import LIBRARY, WORKFLOW, title_mechanism
from services.analyst.rules_backend import AnalysisInput, verify
from services.analyst.settings import AnalystSettings
from services.analyst.slow_loop import episode_seed, make_policy
from services.analyst.trace import TraceFacts, gold_facts, gold_price, read_trace
from shared.contracts.analyst_api.schemas import ColdStartCreate, ColdStartResult
from shared.contracts.chunks import ChunkContent, render_chunk
from shared.contracts.evaluator_api.client import EvaluatorClient
from shared.contracts.evaluator_api.schemas import GateAJobCreate, JobPublic
from shared.contracts.hashing import content_hash
from shared.contracts.registry_api.client import RegistryClient
from shared.contracts.registry_api.schemas import (
    CardCreate,
    CardOutcome,
    ChunkSource,
    DeployableAbstraction,
    GateStatus,
)
from shared.runtime.agent.runner import EpisodeSpec, run_episodes
from shared.runtime.agent.trajectory import Trajectory
from shared.runtime.leak import GoldFacts
from shared.runtime.shopsim.task import Task

BATCH_CARDS, MAX_CLUSTERS_PER_BATCH, MAX_DRAFTS = 40, 12, 16
SUCCESS_CARDS_PER_TRAJECTORY = 2
# Two proposed chunks at least this alike (cosine, average link) propose the same repair. The
# six library templates are at most 0.67 apart (docs/analyst.md), so they never merge.
CLUSTER_SIMILARITY = 0.8
Embed = Callable[[Sequence[str]], np.ndarray]  # texts -> unit-length rows


class GateA(Protocol):
    """Runs Gate A to its end: the finished job (the evaluator's, or a test double's)."""

    def __call__(self, body: GateAJobCreate, idempotency_key: str | None = None) -> JobPublic: ...


def success_mechanisms(task: Task, facts: TraceFacts) -> list[tuple[str, int]]:
    """What a successful bare trajectory did that the library names, with the step where it
    first showed it (at most two, in library order). Reads only the trace and the visible
    request: a success card's text carries no gold."""
    shown = []
    visible = [a for a in task.attributes if f"attribute:{a}" not in task.persona_only]
    explicit = [step for step, query in facts.queries if all(a in query for a in visible)]
    if visible and explicit:
        shown.append(("explicit_query", explicit[0]))
    opened = list(dict.fromkeys(visit.product_id for visit in facts.visits))
    if len(opened) > 1:  # the step that opened a second candidate
        shown.append(("inspect_candidates", next(v.step for v in facts.visits
                                                 if v.product_id == opened[1])))  # fmt: skip
    chosen = sorted(step for step, _ in facts.selections.values())
    if len(chosen) > 1:  # the step that set a second option axis
        shown.append(("complete_options", chosen[1]))
    if chosen:
        shown.append(("option_choice", chosen[0]))
    return shown[:SUCCESS_CARDS_PER_TRAJECTORY]


def success_card(
    request: AnalysisInput, mechanism: str, branch_step: int, *, gold: GoldFacts
) -> CardCreate:
    """The card a successful bare trajectory's behaviour proposes: the library template, checked
    like any card (paired continuations from `branch_step`, then the firewall)."""
    template = LIBRARY[mechanism]
    deployable = DeployableAbstraction(
        failure_mechanism=f"success: {template.failure_surface} avoided",
        applicable_when=template.template.applies_when,
        observable_trigger=template.trigger,
        corrective_procedure=" ".join(template.template.procedure),
        verification_step=template.template.verify,
        proposed_content=template.template,
    )
    verification = verify(request, template.template, None, branch_step)
    audit = {
        "success_behaviour": {"mechanism": mechanism, "step": branch_step},
        "repair_validation_result": verification.summary(),
        "firewall_gold": gold.as_json(),
    }
    return finish_card(
        round=0, task_id=request.trajectory.task_id, checkpoint_id=request.checkpoint_id,
        evidence_id=None, outcome=CardOutcome.ADD, audit=audit, deployable=deployable, gold=gold,
        verification=verification, active=[], cold_start=True,
        extras={"kind": "success", "mechanism": mechanism, "backend": "rules"},
    )  # fmt: skip


def proposed(card: CardCreate) -> ChunkContent | None:
    """The chunk an eligible proposing card offers, or None."""
    if not card.eligible or card.outcome == CardOutcome.NO_PROPOSAL or card.deployable is None:
        return None
    return card.deployable.proposed_content


def _clusters(vectors: np.ndarray, max_clusters: int | None = None) -> list[list[int]]:
    """Row indices grouped by average-link cosine similarity (>= CLUSTER_SIMILARITY), at most
    `max_clusters` groups; groups in order of their first row."""
    if len(vectors) < 2:
        return [[0]] if len(vectors) else []

    def fit(**size: Any) -> np.ndarray:
        return AgglomerativeClustering(metric="cosine", linkage="average", **size).fit_predict(
            vectors
        )

    labels = fit(n_clusters=None, distance_threshold=1 - CLUSTER_SIMILARITY)
    if max_clusters is not None and labels.max() + 1 > max_clusters:
        labels = fit(n_clusters=max_clusters)
    groups: dict[int, list[int]] = {}
    for row, label in enumerate(labels):
        groups.setdefault(int(label), []).append(row)
    return sorted(groups.values(), key=min)


def consolidate(cards: Sequence[CardCreate], embed: Embed) -> list[list[int]]:
    """Clusters of the eligible proposing cards (indices into `cards`) by their proposed
    chunk text: batches of 40 with at most 12 clusters, batch clusters merged by centroid."""
    usable = [index for index, card in enumerate(cards) if proposed(card) is not None]
    if not usable:
        return []
    vectors = embed([render_chunk(proposed(cards[index])) for index in usable])
    batch_clusters: list[list[int]] = []  # positions in `usable`
    for start in range(0, len(usable), BATCH_CARDS):
        rows = list(range(start, min(start + BATCH_CARDS, len(usable))))
        for group in _clusters(vectors[rows], MAX_CLUSTERS_PER_BATCH):
            batch_clusters.append([rows[member] for member in group])
    centroids = np.stack([vectors[members].mean(axis=0) for members in batch_clusters])
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    merged = _clusters(centroids)
    return [
        sorted(usable[p] for cluster in group for p in batch_clusters[cluster]) for group in merged
    ]


def drafts_of(cards: Sequence[CardCreate], clusters: list[list[int]], limit: int):
    """One draft per cluster (its most proposed text), workflow order first, then by support;
    at most `limit`."""
    drafts = []
    for members in clusters:
        texts = [proposed(cards[index]) for index in members]
        counts = Counter(text.content_hash() for text in texts)
        drafts.append((max(texts, key=lambda text: counts[text.content_hash()]), len(members)))

    def order(draft: tuple[ChunkContent, int]) -> tuple:
        mechanism = title_mechanism(draft[0])
        return (WORKFLOW.index(mechanism) if mechanism else len(WORKFLOW), -draft[1])

    return [content for content, _ in sorted(drafts, key=order)[: min(limit, MAX_DRAFTS)]]


def bare_run_cards(
    env,
    trajectories: Sequence[Trajectory],
    analyzer,
    *,
    checkpoint_id: str,
    settings,
    verifier=None,
    progress: Callable[[str, int, int], None] = lambda *_: None,
) -> tuple[list[CardCreate], int]:
    """(cards, successes) of the bare runs: success cards read without gold, failure cards from
    the failure analyst at cold start (empty bank, no REWRITE); all checked by the base policy
    (paired continuations) and the firewall."""
    cards: list[CardCreate] = []
    scored = [t for t in trajectories if t.scored]
    successes = 0
    for index, trajectory in enumerate(scored):
        task = env.task(trajectory.task_id)
        request = AnalysisInput(
            env=env, trajectory=trajectory, bank=[], round=0, cold_start=True,
            checkpoint_id=checkpoint_id, seed=episode_seed(task.task_id, "live"),
            prompt_version=settings.prompt_version, verifier=verifier,
            rollout=settings.rollout_config(), pairs=settings.verification_pairs,
        )  # fmt: skip
        if trajectory.components.get("r_success") == 1.0:
            successes += 1
            facts = read_trace(trajectory)
            gold = gold_facts(task, facts, price=gold_price(task, env.world.catalog))
            for mechanism, step in success_mechanisms(task, facts):
                seed = episode_seed(task.task_id, "live", mechanism)
                cards.append(success_card(replace(request, seed=seed), mechanism, step, gold=gold))
        else:
            try:
                cards.append(analyzer(request))
            except Exception:  # an analyst crash costs this card, not the cold start
                continue
        progress("cards", index + 1, len(scored))
    return cards, successes


def cold_start_job(
    body: ColdStartCreate,
    *,
    settings: AnalystSettings,
    client: RegistryClient,
    analyzer: Callable[[AnalysisInput], CardCreate],
    folder: Path,
    progress: Callable[[str, int, int], None] = lambda *_: None,
    gate_a: GateA | None = None,
    embed: Embed | None = None,
) -> dict[str, Any]:
    env = settings.make_env(body.env_preset)
    tasks = env.task_ids("train")[: body.n_tasks]
    policy = make_policy(body.policy, settings)
    specs = [
        EpisodeSpec(task_id=task, seed=episode_seed(body.run_id, "bare", task), episode_id=None)
        for task in tasks
    ]
    progress("bare runs", 0, len(specs))
    try:
        trajectories = run_episodes(env, policy, specs, settings.rollout_config())
        progress("bare runs", len(specs), len(specs))
        blind = settings.blind_agent(policy)
        try:
            cards, successes = bare_run_cards(
                env, trajectories, analyzer, checkpoint_id=body.policy.checkpoint_id,
                settings=settings, verifier=blind, progress=progress,
            )  # fmt: skip
        finally:
            if blind is not None and blind is not policy:
                blind.close()
    finally:
        policy.close()
    # keyed by the run and the card's content: a cold start retried after a restart replays
    # the cards its first attempt stored instead of writing them twice
    stored = [
        client.create_card(
            card,
            idempotency_key=f"cold-start:{body.run_id}:card:"
            f"{content_hash(card.model_dump(mode='json'))}",
        )
        for card in cards
    ]
    if embed is None:
        from services.analyst.embeddings import embed
    clusters = consolidate(cards, embed)
    drafts = []
    for content in drafts_of(cards, clusters, body.max_drafts):
        fingerprint = content.content_hash()
        chunk = client.create_chunk(
            f"cs-{body.run_id[:40]}-{fingerprint[:12]}",
            content,
            source=ChunkSource.cold_start,
            idempotency_key=f"cold-start:{body.run_id}:{fingerprint}",
        )
        drafts.append(chunk.latest)
    verification = [
        checked
        for row, card in zip(stored, cards, strict=True)
        if (checked := card_verification(row.id, card)) is not None
    ]
    result = ColdStartResult(
        n_trajectories=len(trajectories),
        n_successes=successes,
        n_clusters=len(clusters),
        n_cards=len(cards),
        n_eligible=sum(card.eligible for card in cards),
        n_verified=sum(checked.verified for checked in verification),
        verification=verification,
        draft_version_ids=[draft.id for draft in drafts],
        draft_titles=[draft.content.title for draft in drafts],
    )
    if body.gate_a and drafts:
        request = GateAJobCreate(
            checkpoint_id=body.policy.checkpoint_id,
            draft_version_ids=result.draft_version_ids,
            budget=body.budget,
            alias=body.alias,
            n_tasks=body.gate_a_tasks or None,
            admit=body.gate_a_admit,
        )
        try:
            # the same key (and drafts) again: the evaluator answers with the first Gate A job,
            # so a retried cold start does not gate, select S_0 and move the alias twice
            key = f"cold-start:{body.run_id}:gate-a"
            outcome = (gate_a or _evaluator_gate_a(settings))(request, idempotency_key=key)
        except Exception as error:  # the gate did not finish: say so, do not call it "none kept"
            result.gate_a_status = "incomplete"
            result.gate_a_error = f"{type(error).__name__}: {error}"[:2000]
            return result.model_dump(mode="json")
        recorded = (outcome.result or {}).get("registry") or {}
        result.gate_a_job_id = outcome.id
        # the registry's record of the gate decides whether it finished, not the job's word
        status = _gate_status(client, recorded.get("gate_run_id"))
        if status != GateStatus.complete:
            result.gate_a_status = "incomplete"
            result.gate_a_error = (
                f"the registry's gate run {recorded.get('gate_run_id')} is {status or 'unknown'}"
            )
            return result.model_dump(mode="json")
        result.gate_a_status = "complete"
        result.s0_bank_id = recorded.get("bank_id")
        result.s0_size = 0
        if result.s0_bank_id is not None:
            result.s0_size = len(client.get_bank(result.s0_bank_id).entries)
    return result.model_dump(mode="json")


def _gate_status(client: RegistryClient, gate_run_id: int | None) -> GateStatus | None:
    """The registry's status of a gate run (None: no run recorded)."""
    return None if gate_run_id is None else client.get_gate_run(gate_run_id).status


def _evaluator_gate_a(settings: AnalystSettings, *, timeout_s: float = 3600.0) -> GateA:
    """Gate A through the evaluator service, with the analyst's evaluator token: submit the
    job, wait for its end (`JobFailed` when it failed)."""

    def run(body: GateAJobCreate, idempotency_key: str | None = None) -> JobPublic:
        if settings.evaluator_token is None:
            raise LookupError("ANALYST_EVALUATOR_TOKEN is not set (the evaluator wants a token)")
        token = settings.evaluator_token.get_secret_value()
        with EvaluatorClient(settings.evaluator_url, token=token) as evaluator:
            job = evaluator.submit("gate-a", body, idempotency_key=idempotency_key)
            return evaluator.wait_for_job("gate-a", job.id, timeout=timeout_s)

    return run
