"""The cold start (Trace2Skill): from bare trajectories to a small, gated initial bank S_0.

1. Bare runs of the base policy on train tasks (no skill block).
2. Success cards (no gold; at most two per trajectory: the library mechanisms the trajectory's
   decisive behaviour shows) and failure cards (the failure analyst, REWRITE not allowed).
3. Consolidation in batches of 40 cards, at most 12 clusters per batch, clusters keyed by
   mechanism; batches merge by the same key.
4. At most 16 drafts, one per cluster, in the workflow skeleton's order (query, explicit
   constraints, persona, candidate inspection, variant and price verification, ...),
   registered as cold-start chunks. Idempotency keys derive from the content fingerprint, so
   a resumed run finds its drafts instead of making new ones.
5. Gate A in the evaluator over HTTP (Bernoulli(1/2) masks, positive top K_init <= 10), which
   registers and freezes S_0 and moves `current`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from services.analyst.mechanisms import LIBRARY, WORKFLOW
from services.analyst.rules_backend import AnalysisInput
from services.analyst.settings import AnalystSettings
from services.analyst.slow_loop import episode_seed, make_policy
from services.analyst.trace import TraceFacts, read_trace
from shared.agent.runner import EpisodeSpec, run_episodes
from shared.agent.trajectory import Trajectory
from shared.analyst_api.schemas import ColdStartCreate, ColdStartResult
from shared.registry_api.client import RegistryClient
from shared.registry_api.schemas import CardCreate, CardOutcome, ChunkSource, DeployableAbstraction
from shared.shopsim.task import Task

BATCH_CARDS, MAX_CLUSTERS_PER_BATCH, MAX_DRAFTS = 40, 12, 16
SUCCESS_CARDS_PER_TRAJECTORY = 2


def success_mechanisms(task: Task, facts: TraceFacts) -> list[str]:
    """What a successful bare trajectory did that the library names (at most two, earliest
    first). Reads only the trace and the visible request: a success card carries no gold."""
    shown = []
    queried = " ".join(query for _, query in facts.queries)
    visible = [a for a in task.attributes if f"attribute:{a}" not in task.persona_only]
    if visible and all(a in queried for a in visible):
        shown.append("explicit_query")
    if len({v.product_id for v in facts.visits}) > 1:
        shown.append("inspect_candidates")
    if len(facts.selections) > 1:
        shown.append("complete_options")
    if facts.selections:
        shown.append("option_choice")
    return shown[:SUCCESS_CARDS_PER_TRAJECTORY]


def success_card(task: Task, mechanism: str, trajectory: Trajectory) -> CardCreate:
    template = LIBRARY[mechanism]
    return CardCreate(
        round=0,
        task_id=task.task_id,
        checkpoint_id=trajectory.provenance.checkpoint_id or None,
        outcome=CardOutcome.ADD,
        eligible=True,
        deployable=DeployableAbstraction(
            failure_mechanism=f"success: {template.failure_surface} avoided",
            applicable_when=template.template.applies_when,
            observable_trigger=template.trigger,
            corrective_procedure=" ".join(template.template.procedure),
            verification_step=template.template.verify,
            proposed_content=template.template,
        ),
        extras={"kind": "success", "mechanism": mechanism, "backend": "rules"},
    )


def consolidate(cards: list[CardCreate]) -> dict[str, list[int]]:
    """mechanism -> card indices: batches of 40, <= 12 clusters each, merged by mechanism."""
    clusters: dict[str, list[int]] = {}
    for start in range(0, len(cards), BATCH_CARDS):
        batch: dict[str, list[int]] = {}
        for index in range(start, min(start + BATCH_CARDS, len(cards))):
            card = cards[index]
            key = card.extras.get("mechanism")
            if not card.eligible or key is None:
                continue
            if key in batch or len(batch) < MAX_CLUSTERS_PER_BATCH:
                batch.setdefault(key, []).append(index)
        for key, members in batch.items():
            clusters.setdefault(key, []).extend(members)
    return clusters


def cold_start_job(
    body: ColdStartCreate,
    *,
    settings: AnalystSettings,
    client: RegistryClient,
    analyzer: Callable[[AnalysisInput], CardCreate],
    folder: Path,
    progress: Callable[[str, int, int], None] = lambda *_: None,
    gate_a: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
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
    finally:
        policy.close()
    progress("bare runs", len(specs), len(specs))
    cards: list[CardCreate] = []
    scored = [t for t in trajectories if t.scored]
    successes = [t for t in scored if t.components.get("r_success") == 1.0]
    for index, trajectory in enumerate(scored):
        task = env.task(trajectory.task_id)
        if trajectory in successes:
            shown = success_mechanisms(task, read_trace(trajectory))
            cards += [success_card(task, m, trajectory) for m in shown]
        else:
            request = AnalysisInput(
                env=env, trajectory=trajectory, bank=[], round=0, cold_start=True,
                checkpoint_id=body.policy.checkpoint_id, seed=episode_seed(task.task_id, "live"),
                prompt_version=settings.prompt_version,
            )  # fmt: skip
            try:
                cards.append(analyzer(request))
            except Exception:  # an analyst crash costs this card, not the cold start
                continue
        progress("cards", index + 1, len(scored))
    for card in cards:
        client.create_card(card)
    clusters = consolidate(cards)
    order = sorted(clusters, key=lambda k: (WORKFLOW.index(k) if k in WORKFLOW else 99, k))
    drafts = []
    for mechanism in order[: min(body.max_drafts, MAX_DRAFTS)]:
        content = LIBRARY[mechanism].template if mechanism in LIBRARY else None
        if content is None:
            continue
        fingerprint = content.content_hash()
        chunk = client.create_chunk(
            f"cs-{body.run_id[:40]}-{fingerprint[:12]}",
            content,
            source=ChunkSource.cold_start,
            idempotency_key=f"cold-start:{body.run_id}:{fingerprint}",
        )
        drafts.append(chunk.latest)
    result = ColdStartResult(
        n_trajectories=len(trajectories),
        n_successes=len(successes),
        n_cards=len(cards),
        n_eligible=sum(card.eligible for card in cards),
        draft_version_ids=[draft.id for draft in drafts],
        draft_titles=[draft.content.title for draft in drafts],
    )
    if body.gate_a and drafts:
        request = {
            "checkpoint_id": body.policy.checkpoint_id,
            "draft_version_ids": result.draft_version_ids,
            "budget": body.budget,
            "alias": body.alias,
            **({"n_tasks": body.gate_a_tasks} if body.gate_a_tasks else {}),
        }
        outcome = (gate_a or _evaluator_gate_a(settings))(request)
        recorded = (outcome.get("result") or {}).get("registry") or {}
        result.gate_a_job_id = outcome.get("id")
        result.s0_bank_id = recorded.get("bank_id")
        if result.s0_bank_id is not None:
            result.s0_size = len(client.get_bank(result.s0_bank_id).entries)
    return result.model_dump(mode="json")


def _evaluator_gate_a(settings: AnalystSettings, *, timeout_s: float = 3600.0):
    """Gate A through the evaluator service: POST the job, poll it to its end."""

    def run(body: dict[str, Any]) -> dict[str, Any]:
        with httpx.Client(base_url=settings.evaluator_url.rstrip("/"), timeout=30) as http:
            response = http.post("/v1/gate-a-jobs", json=body)
            response.raise_for_status()
            job = response.json()
            deadline = time.monotonic() + timeout_s
            while job["status"] in ("queued", "running"):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"Gate A job {job['id']} still {job['status']}")
                time.sleep(1.0)
                job = http.get(f"/v1/gate-a-jobs/{job['id']}").json()
            if job["status"] != "succeeded":
                raise RuntimeError(f"Gate A job {job['id']} failed: {job.get('error')}")
            return job

    return run
