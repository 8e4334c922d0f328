"""The deterministic compiler: a round's eligible cards -> at most six canonical candidates.

Rules (the method's): cards merge many-to-one by mechanism, and stay apart when their trigger
or corrective procedure differ; every eligible card is cited by exactly one candidate or
listed evidence-only; an ADD has no target and a REWRITE targets an active chunk; at most
`max_candidates`, the best supported first, the budget never filled for its own sake; a
candidate whose fingerprint (operation, target, content) or meaning (embedding similarity)
repeats one of this round, the active bank or the proposal history is dropped, its cards
becoming evidence-only; a REWRITE is never compared with any version of its own target.
Every candidate text passes the gold firewall of each of its cards.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from services.analyst.cards import chunk_texts
from services.analyst.embeddings import DUPLICATE_SIMILARITY
from services.analyst.mechanisms import WORKFLOW
from shared.contracts.chunks import ChunkContent, render_chunk
from shared.contracts.hashing import content_hash
from shared.contracts.registry_api.schemas import BankEntryPublic, CardCreate, CardOutcome
from shared.runtime.leak import GoldFacts, find_leaks

MAX_CANDIDATES = 6
# text, earlier texts -> (index, similarity) of the closest earlier one, or None
Similarity = Callable[[str, Sequence[str]], tuple[int, float] | None]
# chunk id -> every stored version's text of that chunk (the registry's chunk history)
Versions = Mapping[int, Sequence[ChunkContent]]


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
    # which backend wrote the candidates: {"backend", "used", "attempts", "fell_back", "errors"}
    report: dict = field(
        default_factory=lambda: {"backend": "deterministic", "used": "deterministic"}
    )


@dataclass(frozen=True)
class Proposal:
    """A would-be candidate that obeys the rules, before the budget and the dedupe."""

    operation: str
    target_chunk_id: int | None
    mechanism: str
    content: ChunkContent
    card_ids: tuple[int, ...]


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


def candidate_problem(
    operation: str,
    target: int | None,
    content: ChunkContent,
    cards: Sequence[CardCreate],
    active_ids: set[int],
) -> str | None:
    """Why a candidate breaks the per-candidate rules (None: it obeys them). Every backend's
    candidates go through this one test: an ADD names no target, a REWRITE targets an active
    chunk, and every text passes the gold firewall of each card behind it."""
    if operation == "ADD" and target is not None:
        return "an ADD names no target"
    if operation == "REWRITE" and target not in active_ids:
        return f"REWRITE target {target} is not an active chunk"
    if operation not in ("ADD", "REWRITE"):
        return f"operation {operation!r} is neither ADD nor REWRITE"
    for card in cards:
        gold = card.privileged_audit.get("firewall_gold")
        facts = GoldFacts.from_json(gold) if isinstance(gold, dict) else None
        for name, text in chunk_texts(content).items():
            if findings := find_leaks(text, gold=facts):
                return f"gold firewall: {findings[0].rule} in {name}"
    return None


def citation_problems(
    cited: Sequence[Sequence[int]],
    evidence_only: Sequence[int],
    eligible_ids: set[int],
    max_candidates: int,
) -> list[str]:
    """Why a round's answer breaks the round rules: at most `max_candidates` candidates, each
    citing at least one card, every card an eligible one of the round, cited at most once
    (by one candidate or as evidence-only)."""
    problems = []
    if len(cited) > max_candidates:
        problems.append(f"{len(cited)} candidates: at most {max_candidates} are allowed")
    if any(not ids for ids in cited):
        problems.append("a candidate cites no card")
    counts = Counter(card_id for ids in cited for card_id in ids)
    counts.update(evidence_only)
    if twice := sorted(card_id for card_id, n in counts.items() if n > 1):
        problems.append(f"cards cited more than once: {twice}")
    if unknown := sorted(set(counts) - eligible_ids):
        problems.append(f"cards that are not eligible cards of this round: {unknown}")
    return problems


def eligible_cards(cards: Sequence[tuple[int, CardCreate]]) -> list[tuple[int, CardCreate]]:
    """The cards a compiler reads: eligible proposals with a deployable part."""
    return [
        (card_id, card)
        for card_id, card in cards
        if card.eligible and card.outcome != CardOutcome.NO_PROPOSAL and card.deployable
    ]


def compile_round(
    cards: Sequence[tuple[int, CardCreate]],
    *,
    active: Sequence[BankEntryPublic],
    history: Sequence[tuple[str, ChunkContent]] = (),
    max_candidates: int = MAX_CANDIDATES,
    similar: Similarity | None = None,
    threshold: float = DUPLICATE_SIMILARITY,
    versions: Versions | None = None,
) -> Compilation:
    """Compile `(card id, card)` pairs; `history` holds earlier candidates' (signature,
    content), `versions` every version of the active chunks. `similar` is the semantic
    duplicate test (None: fingerprints only)."""
    groups: dict[tuple, list[tuple[int, CardCreate]]] = {}
    for card_id, card in eligible_cards(cards):
        groups.setdefault(_merge_key(card), []).append((card_id, card))
    active_ids = {entry.chunk_id for entry in active}

    def support(key: tuple) -> tuple:
        mechanism = key[0]
        order = WORKFLOW.index(mechanism) if mechanism in WORKFLOW else len(WORKFLOW)
        return (-len(groups[key]), order, key)

    proposals, refused = [], []
    for key in sorted(groups, key=support):
        members = groups[key]
        ids = tuple(card_id for card_id, _ in members)
        proposal, reason = _proposal(key, members, active_ids)
        if proposal is None:
            refused.append({"mechanism": key[0], "card_ids": list(ids), "reason": reason})
        else:
            proposals.append(proposal)
    result = admit(proposals, active=active, history=history, max_candidates=max_candidates,
                   similar=similar, threshold=threshold, versions=versions)  # fmt: skip
    for drop in refused:
        result.evidence_only.extend(drop["card_ids"])
    result.dropped[:0] = refused
    return result


def admit(
    proposals: Sequence[Proposal],
    *,
    active: Sequence[BankEntryPublic],
    history: Sequence[tuple[str, ChunkContent]] = (),
    max_candidates: int = MAX_CANDIDATES,
    similar: Similarity | None = None,
    threshold: float = DUPLICATE_SIMILARITY,
    versions: Versions | None = None,
) -> Compilation:
    """Proposals, best first -> candidates: the budget, then the fingerprint and semantic
    dedupe against this round, the active bank and the history (a REWRITE never against any
    version of its own target: the current text and every one in `versions`, earlier
    rewrites included); a dropped proposal's cards become evidence-only. The same for every
    backend."""
    result = Compilation()
    seen_signatures = {sig for sig, _ in history}
    seen_signatures |= {signature("ADD", None, e.content) for e in active}
    # (content hash, rendered text) of every earlier text: active chunks, history, this round
    seen = [(e.content.content_hash(), render_chunk(e.content)) for e in active]
    seen += [(content.content_hash(), render_chunk(content)) for _, content in history]
    targets = _versions_by_chunk(active, versions or {})
    for proposal in proposals:
        sig = signature(proposal.operation, proposal.target_chunk_id, proposal.content)
        text = render_chunk(proposal.content)
        # a REWRITE is never a duplicate of any text its own target has had: rewriting a
        # chunk keeps most of what it said, so each of its versions reads alike
        rewrite = proposal.operation == "REWRITE"
        own = targets.get(proposal.target_chunk_id, set()) if rewrite else set()
        others = [(h, t) for h, t in seen if h not in own]
        reason = None
        if len(result.candidates) >= max_candidates:
            reason = f"over the budget of {max_candidates} candidates"
        elif sig in seen_signatures:
            reason = "same fingerprint as the active bank, this round or the history"
        elif similar is not None and (match := similar(text, [t for _, t in others])):
            index, score = match
            if score >= threshold:
                reason = f"semantic duplicate (cosine {score:.3f}) of an earlier text #{index}"
        if reason is not None:
            result.evidence_only.extend(proposal.card_ids)
            ids = list(proposal.card_ids)
            result.dropped.append(
                {"mechanism": proposal.mechanism, "card_ids": ids, "reason": reason}
            )
            continue
        result.candidates.append(
            CompiledCandidate(
                proposal.operation,
                proposal.target_chunk_id,
                proposal.mechanism,
                proposal.content,
                proposal.card_ids,
                sig,
            )
        )
        seen_signatures.add(sig)
        seen.append((proposal.content.content_hash(), text))
    return result


def _versions_by_chunk(active: Sequence[BankEntryPublic], versions: Versions) -> dict[int, set]:
    """Content hashes of every known version of each active chunk, by chunk id."""
    known = {e.chunk_id: {e.content.content_hash()} for e in active}
    for chunk_id, contents in versions.items():
        known.setdefault(chunk_id, set()).update(c.content_hash() for c in contents)
    return known


def _proposal(
    key: tuple, members: list[tuple[int, CardCreate]], active_ids: set[int]
) -> tuple[Proposal | None, str | None]:
    mechanism, operation, target = key[0], key[1], key[2]
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
    cards = [card for _, card in members]
    if reason := candidate_problem(operation, target, content, cards, active_ids):
        return None, reason
    ids = tuple(card_id for card_id, _ in members)
    return Proposal(operation, target, mechanism, content, ids), None
