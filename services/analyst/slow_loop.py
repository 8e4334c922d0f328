"""A round's slow loop on the frozen checkpoint: full-skill retries of the pending all-wrong
groups, failure analysis of the failed retries, compilation, registry writes, funnel.

    retry succeeded  -> internalization deficit (recorded, no proposal)
    retry failed     -> the failure analyst writes a card (registry: cards)
    retry unscored   -> rerun up to `retry_attempts` times, then a runtime error
    analyst crashed  -> retried up to `analyst_attempts` times, then ANALYST_ERROR (recorded)

The retry carries exactly the bank's chunks (ids, versions, content) and is checked against
the bank before its outcome counts. Retries never reach the trainer.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from services.analyst.cards import card_verification
from services.analyst.compiler import Compilation, compile_round
from services.analyst.counterfactual_trials import bank_chunks, skill_block_hash
from services.analyst.rules_backend import AnalysisInput
from services.analyst.settings import AnalystSettings
from services.analyst.store import GroupStore
from shared.contracts.analyst_api.schemas import (
    AllWrongGroupPublic,
    CandidateSummary,
    CompileRoundCreate,
    CompileRoundResult,
    FunnelCounts,
    PolicySpec,
)
from shared.contracts.chunks import ChunkContent
from shared.contracts.hashing import hash_key
from shared.contracts.registry_api.client import AuthError, Conflict, RegistryClient
from shared.contracts.registry_api.schemas import (
    BankPublic,
    CandidateCreate,
    CandidateOperation,
    CardCreate,
    CardPublic,
    RetryOutcome,
)
from shared.runtime.agent.runner import EpisodeSpec, run_episodes
from shared.runtime.agent.trajectory import Trajectory

Analyzer = Callable[[AnalysisInput], CardCreate]


class RetryMismatch(RuntimeError):
    """A retry's prompt did not carry exactly the bank's chunks."""


def make_policy(spec: PolicySpec, settings: AnalystSettings):
    """The frozen checkpoint's policy backend, through the agent runtime's factory."""
    from shared.runtime.agent.backends import make_backend

    options = dict(settings.backend_options)
    if settings.policy_server_url:
        from services.analyst.policy_server import served_policy

        return served_policy(spec, settings)
    if spec.backend == "openai":
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
        return make_backend(
            "openai",
            spec.model or spec.checkpoint_id,
            base_url=spec.base_url,
            checkpoint_id=spec.checkpoint_id,
            api_key=key,
            **options,
        )
    model = spec.model or (spec.weights_uri or spec.checkpoint_id).removeprefix("file://")
    if spec.backend == "transformers":
        options = {"device": settings.device, "dtype": settings.dtype, **options}
    return make_backend(spec.backend, model, checkpoint_id=spec.checkpoint_id, **options)


def episode_seed(*parts: object) -> int:
    return int.from_bytes(hash_key("analyst", *parts)[:4], "big")


def verify_retry(trajectory: Trajectory, bank: BankPublic, prompt_version: str) -> None:
    """The retry's prompt carried exactly the frozen bank it claims: its chunk ids and
    versions, its hash, the prompt layout the analyst runs, and a skill block whose hash is
    the one the frozen bank's own content renders to (so edited text cannot pass)."""
    expected = [f"{entry.slug}@{entry.version}" for entry in bank.entries]
    provenance = trajectory.provenance
    if provenance.injected != expected:
        raise RetryMismatch(f"retry injected {provenance.injected}, bank {expected}")
    if provenance.bank_hash != bank.content_hash:
        raise RetryMismatch("retry bank hash differs from the frozen bank's")
    if provenance.prompt_version != prompt_version:
        raise RetryMismatch(f"retry prompt {provenance.prompt_version}, expected {prompt_version}")
    if provenance.skill_block_hash != skill_block_hash(bank_chunks(bank.entries), prompt_version):
        raise RetryMismatch("retry skill block is not the frozen bank's content")


def run_retries(
    groups: Sequence[AllWrongGroupPublic],
    bank: BankPublic,
    *,
    env,
    policy,
    settings: AnalystSettings,
    traces: Path,
) -> dict[str, tuple[str, Trajectory | None]]:
    """group id -> (outcome, retry trajectory): one full-bank trajectory per group, unscored
    ones rerun up to `retry_attempts` times."""
    chunks = tuple(bank_chunks(bank.entries))
    config = settings.rollout_config()
    outcomes: dict[str, tuple[str, Trajectory | None]] = {}
    waiting = list(groups)
    for attempt in range(settings.retry_attempts + 1):
        if not waiting:
            break
        specs = [
            EpisodeSpec(
                task_id=group.request.task_id,
                seed=episode_seed(group.id, "retry", attempt),
                chunks=chunks,
                inclusion=tuple([1] * len(chunks)),
                bank_id=str(bank.id),
                bank_hash=bank.content_hash,
                group_id=group.id,
                episode_id=f"{group.id}-retry-{attempt}",
            )
            for group in waiting
        ]
        trajectories = run_episodes(env, policy, specs, config)
        still = []
        for group, trajectory in zip(waiting, trajectories, strict=True):
            path = traces / f"{trajectory.episode_id}.json"
            path.write_text(trajectory.to_json(), encoding="utf-8")
            if not trajectory.scored:
                still.append(group)
                outcomes[group.id] = ("runtime_error", trajectory)
                continue
            verify_retry(trajectory, bank, config.prompt_version)
            success = trajectory.components.get("r_success") == 1.0
            outcomes[group.id] = ("success" if success else "failure", trajectory)
        waiting = still
    return outcomes


def compile_round_job(
    body: CompileRoundCreate,
    *,
    settings: AnalystSettings,
    store: GroupStore,
    client: RegistryClient,
    analyzer: Analyzer,
    folder: Path,
    progress: Callable[[str, int, int], None] = lambda *_: None,
    similar=None,
    compiler: Callable[..., Compilation] = compile_round,
) -> dict[str, Any]:
    """The whole round: retries -> cards -> candidates (see the module docstring).
    `compiler` is `compile_round` or an `LLMCompiler.compile` (same arguments and result)."""
    bank = client.get_bank(body.bank_id)
    if bank.frozen_at is None:
        raise ValueError(f"bank {body.bank_id} is not frozen")
    groups = store.list(run_id=body.run_id, round=body.round, status="pending")
    env = settings.make_env(body.env_preset)
    traces = folder / "traces"
    traces.mkdir(parents=True, exist_ok=True)
    progress("retries", 0, len(groups))
    policy = make_policy(body.policy, settings)
    try:
        outcomes = run_retries(
            groups, bank, env=env, policy=policy, settings=settings, traces=traces
        )
        progress("retries", len(groups), len(groups))
        blind = settings.blind_agent(policy)
        try:
            _analyze_groups(groups, outcomes, traces, body, bank, env, store, client, analyzer,
                            settings, blind, progress)  # fmt: skip
        finally:
            if blind is not None and blind is not policy:
                blind.close()
    finally:
        policy.close()
    return _compile(body, bank, store, client, settings, folder, similar, compiler)


def _analyze_groups(
    groups, outcomes, traces, body, bank, env, store, client, analyzer, settings, blind, progress
) -> None:
    """Settle each retry; a failed one goes to the failure analyst (once: a card already
    stored for the group is found, not written again)."""
    stored_cards = _cards_by_group(client, body.round) if groups else {}
    for index, group in enumerate(groups):
        outcome, trajectory = outcomes[group.id]
        uri = (traces / f"{trajectory.episode_id}.json").as_uri() if trajectory else None
        _settle(client, group, outcome, uri)
        if outcome == "success":
            store.update(group.id, status="deficit", retry_reward=trajectory.reward,
                         retry_trace_uri=uri)  # fmt: skip
        elif outcome == "runtime_error":
            store.update(group.id, status="runtime_error", retry_trace_uri=uri,
                         error=trajectory.error if trajectory else None)  # fmt: skip
        elif group.id in stored_cards:  # stored before an interruption lost the group's record
            card = stored_cards[group.id]
            store.update(group.id, status="analyzed", retry_trace_uri=uri,
                         retry_reward=trajectory.reward, card_id=card.id,
                         card_outcome=card.outcome.value)  # fmt: skip
        else:
            _analyze_group(group, trajectory, uri, body, bank.entries, env, store, client,
                           analyzer, settings, blind)  # fmt: skip
        progress("analysis", index + 1, len(groups))


def _cards_by_group(client: RegistryClient, round: int) -> dict[str, CardPublic]:
    """The round's cards already in the registry, by the analyst group they were written for."""
    return {
        card.extras["group_id"]: card
        for card in client.list_cards(round=round)
        if isinstance(card.extras, dict) and "group_id" in card.extras
    }


def _settle(client: RegistryClient, group, outcome: str, uri: str | None) -> None:
    """Record the retry outcome on the registry's evidence row, when the trainer made one.

    The registry lets only the trainer role settle evidence; with an analyst token that write
    is refused, and the outcome stays in the analyst's own record (and the funnel)."""
    if group.request.evidence_id is None:
        return
    with contextlib.suppress(AuthError):
        client.settle_retry(group.request.evidence_id, RetryOutcome(outcome), trace_uri=uri)


def _analyze_group(
    group, trajectory, uri, body, active, env, store, client, analyzer, settings, blind
):
    request = AnalysisInput(
        env=env,
        trajectory=trajectory,
        bank=active,
        round=body.round,
        checkpoint_id=body.policy.checkpoint_id,
        evidence_id=group.request.evidence_id,
        seed=episode_seed(group.id, "live"),
        prompt_version=settings.prompt_version,
        verifier=blind,
        rollout=settings.rollout_config(),
        pairs=settings.verification_pairs,
    )
    errors = []
    for _ in range(settings.analyst_attempts):
        try:
            card = analyzer(request)
            break
        except Exception as error:  # an analyst crash is recorded and retried, never fatal
            errors.append(f"{type(error).__name__}: {error}")
    else:
        store.update(group.id, status="analyst_error", retry_trace_uri=uri,
                     retry_reward=trajectory.reward, error="; ".join(errors))  # fmt: skip
        return
    card = card.model_copy(update={"extras": {**card.extras, "group_id": group.id,
                                               "retry_trace_uri": uri}})  # fmt: skip
    stored = client.create_card(card)
    store.update(group.id, status="analyzed", retry_trace_uri=uri, retry_reward=trajectory.reward,
                 card_id=stored.id, card_outcome=card.outcome.value)  # fmt: skip


def _history(client: RegistryClient, round: int):
    """Earlier rounds' candidates as (signature, content) for the dedupe."""
    history = []
    for candidate in client.list_candidates():
        if candidate.round < round:
            version = client.get_chunk_version_by_id(candidate.chunk_version_id)
            history.append((candidate.signature, version.content))
    return history


def _versions(client: RegistryClient, active) -> dict[int, list[ChunkContent]]:
    """Every stored version of each active chunk, for the dedupe (a REWRITE is never compared
    with a version of its own target)."""
    return {
        entry.chunk_id: [version.content for version in client.chunk_history(entry.chunk_id)]
        for entry in active
    }


def _compile(body, bank, store, client, settings, folder, similar, compiler) -> dict[str, Any]:
    groups = store.list(run_id=body.run_id, round=body.round)
    card_ids = [g.card_id for g in groups if g.card_id is not None]
    cards = [(card_id, _card(client, card_id)) for card_id in card_ids]
    if similar is None and settings.semantic_dedupe:
        from services.analyst.embeddings import most_similar as similar
    # A retried compile keeps what an earlier attempt of this round stored (each card is cited
    # by at most one candidate per round) and compiles only the cards those leave.
    earlier = _stored_this_round(client, body)
    spoken_for = {card_id for stored in earlier for card_id in stored.source_card_ids}
    compiled = compiler(
        [(card_id, card) for card_id, card in cards if card_id not in spoken_for],
        active=bank.entries,
        history=_history(client, body.round),
        max_candidates=max(0, body.max_candidates - len(earlier)),
        similar=similar,
        versions=_versions(client, bank.entries),
    )
    summaries = [_stored_summary(client, stored) for stored in earlier]
    evidence_only = list(compiled.evidence_only)
    for candidate in compiled.candidates:
        if spoken_for & set(candidate.card_ids):  # cited already by this round's candidate
            continue
        create = CandidateCreate(
            round=body.round,
            operation=CandidateOperation(candidate.operation),
            target_chunk_id=candidate.target_chunk_id,
            content=candidate.content,
            source_card_ids=list(candidate.card_ids),
            failure_mechanism=candidate.mechanism,
            proposal_checkpoint=body.policy.checkpoint_id,
        )
        try:
            stored = client.create_candidate(create)
        except Conflict as conflict:
            # 409: the registry holds this exact candidate (an earlier round's duplicate), or a
            # card it cites is cited by another candidate of this round: its cards stay evidence
            evidence_only.extend(candidate.card_ids)
            compiled.dropped.append({"mechanism": candidate.mechanism,
                                     "card_ids": list(candidate.card_ids),
                                     "reason": f"registry refused (409): {conflict}"})  # fmt: skip
            continue
        summaries.append(
            CandidateSummary(
                candidate_id=stored.id,
                signature=stored.signature,
                operation=candidate.operation,
                target_chunk_id=candidate.target_chunk_id,
                mechanism=candidate.mechanism,
                title=candidate.content.title,
                source_card_ids=list(candidate.card_ids),
            )
        )
    funnel = FunnelCounts(
        run_id=body.run_id,
        round=body.round,
        all_wrong_groups=len(groups),
        retries=sum(g.status != "pending" for g in groups),
        deficits=sum(g.status == "deficit" for g in groups),
        runtime_errors=sum(g.status == "runtime_error" for g in groups),
        cards=len(cards),
        verified=sum(_verified(card) for _, card in cards),
        eligible=sum(card.eligible for _, card in cards),
        candidates=len(summaries),
        compiler=_compiler_label(compiled.report),
    )
    store.save_funnel(funnel)
    (folder / "compilation.json").write_text(
        json.dumps(
            {
                "dropped": compiled.dropped,
                "evidence_only": evidence_only,
                "compiler": compiled.report,
            },
            indent=1,
        )
    )
    return CompileRoundResult(
        candidate_ids=[s.candidate_id for s in summaries if s.candidate_id is not None],
        candidates=summaries,
        card_ids=card_ids,
        evidence_only_card_ids=evidence_only,
        funnel=funnel,
        verification=[
            checked
            for card_id, card in cards
            if (checked := card_verification(card_id, card)) is not None
        ],
        compiler=compiled.report,
    ).model_dump(mode="json")


def _verified(card: CardCreate) -> bool:
    return bool((card.extras.get("verification") or {}).get("verified"))


def _stored_this_round(client: RegistryClient, body):
    """Candidates an earlier attempt of this round's compile stored (same round, same frozen
    checkpoint)."""
    return [
        stored
        for stored in client.list_candidates(round=body.round)
        if stored.proposal_checkpoint == body.policy.checkpoint_id
    ]


def _stored_summary(client: RegistryClient, stored) -> CandidateSummary:
    version = client.get_chunk_version_by_id(stored.chunk_version_id)
    return CandidateSummary(
        candidate_id=stored.id,
        signature=stored.signature,
        operation=stored.operation.value,
        target_chunk_id=stored.target_chunk_id,
        mechanism=stored.failure_mechanism or "",
        title=version.content.title,
        source_card_ids=list(stored.source_card_ids),
    )


def _compiler_label(report: dict) -> str:
    """The funnel's compiler column: the backend asked for, and the one used when it fell back."""
    asked, used = report.get("backend", "deterministic"), report.get("used", "deterministic")
    return asked if asked == used else f"{asked}->{used}"


def _card(client: RegistryClient, card_id: int) -> CardCreate:
    """A stored card as the compiler reads it (deployable part and the firewall's gold)."""
    public = client.get_card(card_id)
    audit = client.get_card_audit(card_id)  # the findings' text and a blocked card's deployable
    return CardCreate(
        round=public.round,
        task_id=public.task_id,
        checkpoint_id=public.checkpoint_id,
        evidence_id=public.evidence_id,
        outcome=public.outcome,
        eligible=public.eligible,
        privileged_audit=audit.privileged_audit,
        deployable=audit.deployable,
        firewall_findings=audit.firewall_findings,
        forced_no_proposal_reason=public.forced_no_proposal_reason,
        extras=public.extras,
    )
