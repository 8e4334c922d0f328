"""The deterministic compiler: a round's eligible cards -> at most six canonical candidates.

Rules (the method's): cards merge many-to-one by mechanism, and stay apart when their trigger
or corrective procedure differ; every eligible card is cited by exactly one candidate or
listed evidence-only; an ADD has no target and a REWRITE targets an active chunk; at most
`max_candidates`, the best supported first, the budget never filled for its own sake; a
candidate whose fingerprint (operation, target, content) or meaning (embedding similarity)
repeats one of this round, the active bank or the proposal history is dropped, its cards
becoming evidence-only. Every candidate text passes the gold firewall of each of its cards.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from services.analyst.cards import chunk_texts
from services.analyst.embeddings import DUPLICATE_SIMILARITY
from services.analyst.mechanisms import WORKFLOW
from shared.chunks import ChunkContent, render_chunk
from shared.hashing import content_hash
from shared.leak import GoldFacts, find_leaks
from shared.registry_api.schemas import BankEntryPublic, CardCreate, CardOutcome

MAX_CANDIDATES = 6
# text, earlier texts -> (index, similarity) of the closest earlier one, or None
Similarity = Callable[[str, Sequence[str]], tuple[int, float] | None]


@dataclass(frozen=True)
class CompiledCandidate:
    operation: str  # ADD | REWRITE
    target_chunk_id: int | None
    mechanism: str
    content: ChunkContent
    card_ids: tuple[int, ...]
    signature: str


@dataclass
class Compilation:
    candidates: list[CompiledCandidate] = field(default_factory=list)
    evidence_only: list[int] = field(default_factory=list)
    dropped: list[dict] = field(default_factory=list)  # why a would-be candidate was not kept


def signature(operation: str, target: int | None, content: ChunkContent) -> str:
    """The registry's candidate fingerprint: operation, target and content hash."""
    return content_hash(
        {"operation": operation, "target": target, "content": content.content_hash()}
    )


def _merge_key(card: CardCreate) -> tuple:
    deployable = card.deployable
    assert deployable is not None
    return (
        card.extras.get("mechanism") or deployable.failure_mechanism,
        card.outcome.value,
        deployable.target_chunk_id,
        " ".join(deployable.observable_trigger.casefold().split()),
        " ".join(deployable.corrective_procedure.casefold().split()),
    )


def compile_round(
    cards: Sequence[tuple[int, CardCreate]],
    *,
    active: Sequence[BankEntryPublic],
    history: Sequence[tuple[str, ChunkContent]] = (),
    max_candidates: int = MAX_CANDIDATES,
    similar: Similarity | None = None,
    threshold: float = DUPLICATE_SIMILARITY,
) -> Compilation:
    """Compile `(card id, card)` pairs; `history` holds earlier candidates' (signature,
    content). `similar` is the semantic duplicate test (None: fingerprints only)."""
    result = Compilation()
    groups: dict[tuple, list[tuple[int, CardCreate]]] = {}
    for card_id, card in cards:
        if not card.eligible or card.outcome == CardOutcome.NO_PROPOSAL or card.deployable is None:
            continue
        groups.setdefault(_merge_key(card), []).append((card_id, card))
    active_ids = {entry.chunk_id for entry in active}
    seen_signatures = {sig for sig, _ in history}
    seen_signatures |= {signature("ADD", None, e.content) for e in active}
    seen_texts = [render_chunk(e.content) for e in active]
    seen_texts += [render_chunk(content) for _, content in history]

    def support(key: tuple) -> tuple:
        mechanism = key[0]
        order = WORKFLOW.index(mechanism) if mechanism in WORKFLOW else len(WORKFLOW)
        return (-len(groups[key]), order, key)

    for key in sorted(groups, key=support):
        members = groups[key]
        ids = tuple(card_id for card_id, _ in members)
        candidate, reason = _candidate(key, members, active_ids)
        if candidate is not None and len(result.candidates) >= max_candidates:
            reason = f"over the budget of {max_candidates} candidates"
        if candidate is not None and reason is None:
            if candidate.signature in seen_signatures:
                reason = "same fingerprint as the active bank, this round or the history"
            elif similar is not None and (
                match := similar(render_chunk(candidate.content), seen_texts)
            ):
                index, score = match
                if score >= threshold:
                    reason = f"semantic duplicate (cosine {score:.3f}) of an earlier text #{index}"
        if candidate is None or reason is not None:
            result.evidence_only.extend(ids)
            result.dropped.append({"mechanism": key[0], "card_ids": list(ids), "reason": reason})
            continue
        result.candidates.append(candidate)
        seen_signatures.add(candidate.signature)
        seen_texts.append(render_chunk(candidate.content))
    return result


def _candidate(
    key: tuple, members: list[tuple[int, CardCreate]], active_ids: set[int]
) -> tuple[CompiledCandidate | None, str | None]:
    mechanism, operation, target = key[0], key[1], key[2]
    if operation == "ADD" and target is not None:
        return None, "an ADD names no target"
    if operation == "REWRITE" and target not in active_ids:
        return None, f"REWRITE target {target} is not an active chunk"
    proposed = [
        card.deployable.proposed_content
        for _, card in members
        if card.deployable and card.deployable.proposed_content
    ]
    if not proposed:
        return None, "no proposed chunk content"
    # the most proposed text (first proposed among ties)
    counts = Counter(content.content_hash() for content in proposed)
    content = max(proposed, key=lambda c: counts[c.content_hash()])
    for _, card in members:
        gold = card.privileged_audit.get("firewall_gold")
        facts = GoldFacts.from_json(gold) if isinstance(gold, dict) else None
        for text in chunk_texts(content).values():
            if findings := find_leaks(text, gold=facts):
                return None, f"gold firewall: {findings[0].rule}"
    ids = tuple(card_id for card_id, _ in members)
    return (
        CompiledCandidate(
            operation, target, mechanism, content, ids, signature(operation, target, content)
        ),
        None,
    )
