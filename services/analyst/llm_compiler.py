"""The `llm` compiler: an OpenAI-compatible chat model merges a round's eligible cards.

Protocol (one round):
- The model sees the eligible cards' DEPLOYABLE parts only (card id, outcome, mechanism, the
  abstraction's fields and proposed chunk; never the privileged audit, which holds gold), the
  active chunks and the candidate budget, and answers one JSON object (`CompilerAnswer`,
  asked for as a JSON schema response format).
- The answer is checked with the deterministic compiler's own rules
  (`compiler.citation_problems`, `compiler.candidate_problem`: at most `max_candidates`, every
  card cited at most once, ADD without a target, REWRITE of an active chunk, the gold firewall
  of each cited card). A broken answer is sent back with the list of problems, `repairs` times
  at most.
- A valid answer goes through `compiler.admit` (budget, fingerprint and MiniLM dedupe), exactly
  as the deterministic compiler's proposals do. No valid answer (or no reachable model): the
  deterministic compiler runs instead, and the report says so. Never a crash.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from services.analyst.compiler import (
    MAX_CANDIDATES,
    Compilation,
    Proposal,
    Similarity,
    Versions,
    admit,
    candidate_problem,
    citation_problems,
    compile_round,
    eligible_cards,
)
from services.analyst.embeddings import DUPLICATE_SIMILARITY
from shared.contracts.chunks import ChunkContent
from shared.contracts.registry_api.schemas import BankEntryPublic, CardCreate

SYSTEM_PROMPT = """You compile a shopping agent's failure cards into skill-chunk candidates.
Each card is one trajectory's proposed repair. Merge cards that describe the same failure
mechanism with the same trigger and corrective procedure into one candidate; keep them apart
otherwise. Rules:
- at most {max_candidates} candidates, the best supported (most cards) first;
- every card id is cited by exactly one candidate or listed in evidence_only, never twice;
- outcome ADD has target_chunk_id null; outcome REWRITE targets one of the active chunk ids;
- chunk texts are generic: no product ids, brands, titles, option values or task ids.
Answer with one JSON object matching the schema, nothing else."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AnsweredCandidate(_Strict):
    outcome: Literal["ADD", "REWRITE"]
    target_chunk_id: int | None = None
    mechanism: str = Field(min_length=1, max_length=200)
    content: ChunkContent
    card_ids: list[int] = Field(min_length=1)


class CompilerAnswer(_Strict):
    """What the model answers: candidates, best supported first, and evidence-only cards."""

    candidates: list[AnsweredCandidate]
    evidence_only: list[int] = Field(default_factory=list)


def deployable_view(card_id: int, card: CardCreate) -> dict[str, Any]:
    """What the model may read of a card: its deployable part, never the privileged audit."""
    assert card.deployable is not None
    return {
        "card_id": card_id,
        "outcome": card.outcome.value,
        "mechanism": card.extras.get("mechanism") or card.deployable.failure_mechanism,
        **card.deployable.model_dump(mode="json"),
    }


def check_answer(
    raw: str, cards: dict[int, CardCreate], active_ids: set[int], max_candidates: int
) -> tuple[list[Proposal], list[str]]:
    """(proposals, problems) of one answer; proposals only when there is no problem."""
    try:
        answer = CompilerAnswer.model_validate_json(raw)
    except ValidationError as error:
        return [], [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors()[:5]]
    cited = [candidate.card_ids for candidate in answer.candidates]
    problems = citation_problems(cited, answer.evidence_only, set(cards), max_candidates)
    proposals = []
    for index, candidate in enumerate(answer.candidates):
        behind = [cards[i] for i in candidate.card_ids if i in cards]
        if problem := candidate_problem(
            candidate.outcome, candidate.target_chunk_id, candidate.content, behind, active_ids
        ):
            problems.append(f"candidate {index}: {problem}")
        proposals.append(
            Proposal(
                candidate.outcome,
                candidate.target_chunk_id,
                candidate.mechanism,
                candidate.content,
                tuple(candidate.card_ids),
            )
        )
    return ([] if problems else proposals), problems


class LLMCompiler:
    """`compile(...)` takes the deterministic `compile_round`'s arguments and returns its
    `Compilation`, with `report` saying which backend's candidates it holds."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        repairs: int = 3,
        timeout_s: float = 120.0,
        temperature: float = 0.0,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s)
        self.model, self.repairs, self.temperature = model, repairs, temperature

    @classmethod
    def from_settings(cls, settings) -> LLMCompiler:
        if not (settings.llm_base_url and settings.llm_model):
            raise LookupError("the llm compiler needs ANALYST_LLM_BASE_URL and ANALYST_LLM_MODEL")
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
        return cls(settings.llm_base_url, settings.llm_model, api_key=key,
                   repairs=settings.llm_compiler_repairs,
                   timeout_s=settings.llm_timeout_s)  # fmt: skip

    def compile(
        self,
        cards: Sequence[tuple[int, CardCreate]],
        *,
        active: Sequence[BankEntryPublic],
        history: Sequence[tuple[str, ChunkContent]] = (),
        max_candidates: int = MAX_CANDIDATES,
        similar: Similarity | None = None,
        threshold: float = DUPLICATE_SIMILARITY,
        versions: Versions | None = None,
    ) -> Compilation:
        eligible = dict(eligible_cards(cards))
        dedupe = {"active": active, "history": history, "max_candidates": max_candidates,
                  "similar": similar, "threshold": threshold, "versions": versions}  # fmt: skip
        report = {"backend": "llm", "model": self.model, "attempts": 0, "errors": []}
        if not eligible:  # nothing to merge: no call
            return _reported(admit([], **dedupe), report, used="llm")
        proposals = self._ask(eligible, active, max_candidates, report)
        if proposals is None:
            fallback = compile_round(cards, **dedupe)
            return _reported(fallback, report, used="deterministic")
        result = admit(proposals, **dedupe)
        cited = {i for proposal in proposals for i in proposal.card_ids}
        result.evidence_only.extend(i for i in eligible if i not in cited)
        return _reported(result, report, used="llm")

    def _ask(self, eligible, active, max_candidates, report) -> list[Proposal] | None:
        """The model's valid proposals, or None after the bounded attempts."""
        active_ids = {entry.chunk_id for entry in active}
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT.format(max_candidates=max_candidates)},
            {"role": "user", "content": self._brief(eligible, active, max_candidates)},
        ]
        for _ in range(1 + self.repairs):
            report["attempts"] += 1
            try:
                raw = self._chat(messages)
            except (httpx.HTTPError, KeyError, IndexError, TypeError, ValueError) as error:
                report["errors"].append(f"chat failed: {type(error).__name__}: {error}"[:500])
                continue
            proposals, problems = check_answer(raw, eligible, active_ids, max_candidates)
            if not problems:
                return proposals
            report["errors"].append("; ".join(problems)[:1000])
            messages += [
                {"role": "assistant", "content": raw},
                {"role": "user", "content": "Your answer breaks these rules:\n- "
                 + "\n- ".join(problems) + "\nAnswer again with the whole corrected JSON."},
            ]  # fmt: skip
        return None

    def _brief(self, eligible, active, max_candidates) -> str:
        views = [deployable_view(card_id, card) for card_id, card in eligible.items()]
        chunks = [{"chunk_id": e.chunk_id, **e.content.model_dump(mode="json")} for e in active]
        return (
            f"Candidate budget: {max_candidates}.\n\nActive chunks: {json.dumps(chunks)}\n\n"
            f"Eligible cards (deployable parts): {json.dumps(views, ensure_ascii=False)}"
        )

    def _chat(self, messages: list[dict[str, Any]]) -> str:
        schema = {"name": "compiler_answer", "schema": CompilerAnswer.model_json_schema()}
        body = {"model": self.model, "messages": messages, "temperature": self.temperature,
                "response_format": {"type": "json_schema", "json_schema": schema}}  # fmt: skip
        response = self.http.post("/chat/completions", json=body)
        response.raise_for_status()
        return response.json()["choices"][0]["message"]["content"] or ""

    def close(self) -> None:
        self.http.close()


def _reported(result: Compilation, report: dict, *, used: str) -> Compilation:
    result.report = {**report, "used": used, "fell_back": used != "llm"}
    return result


__all__: Sequence[str] = ("CompilerAnswer", "LLMCompiler", "check_answer", "deployable_view")
