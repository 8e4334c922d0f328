"""The `llm` failure analyst: any OpenAI-compatible chat model with tool calls.

Protocol (one analysis):
- The model sees the current skill, the failed full-skill trace compacted and redacted (product
  ids, 10+ digit numbers, task ids and the persona's id and dates replaced), and the
  privileged gold audit (the goal and the chosen purchase).
- Tools: `search(query)` and `click(value)` act in a fresh live session of the same task
  (each purchase ends one diagnostic trial, reports its reward and opens a new episode);
  `submit_failure_card(card)` ends the analysis. At most `max_rounds` rounds; the last offers
  only `submit_failure_card`.
- The analyst acts with gold in view, so its own trials are diagnosis, never verification.
  A submitted proposal is verified by a counterfactual trial of the card's own chunk (`live`):
  the retry replayed to the card's branch step, then the blind agent with the bank plus that
  chunk (ADD) or with it in place of its target (REWRITE).
- A submitted card is validated against the card schema; an invalid one is answered with the
  error and may be repaired `repairs` times. No valid card: NO_PROPOSAL, never a crash.
- The card then goes through the same rules as every card (`cards.finish_card`): firewall,
  counterfactual success required, REWRITE only of an active chunk and never at cold start.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from services.analyst.cards import finish_card
from services.analyst.counterfactual_trials import bank_chunks
from services.analyst.diagnosis import diagnose
from services.analyst.rules_backend import AnalysisInput, verify
from services.analyst.trace import gold_facts, gold_price, read_trace
from shared.contracts.chunks import ChunkContent, render_skill_block
from shared.contracts.registry_api.schemas import CardCreate, CardOutcome, DeployableAbstraction

_REDACTIONS = (
    (re.compile(r"\bB0[0-9A-Z]{8}\b"), "<product-id>"),
    (re.compile(r"\d{10,}"), "<long-number>"),
    (re.compile(r"task[-_ ]?\d+", re.I), "<task-id>"),
    (re.compile(r"persona-\d+"), "<persona-id>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}\b"), "<date>"),
)
MAX_OBSERVATION_CHARS = 600

SYSTEM_PROMPT = """You are the failure analyst of a shopping agent's skill bank.
You see the current skill, the agent's failed trajectory (ids redacted) and, privately, the
gold goal and the purchase it made. Find the earliest step where the agent went wrong, propose
the smallest reusable repair, and test it: act in the live shop with search/click, following
your repair, until a purchase succeeds. Then call submit_failure_card once, with
privileged_audit.earliest_divergence_step set to the 0-based step of the trace where the agent
first went wrong. Your own purchases are only diagnosis: the card counts only if an agent that
sees no gold, replaying the trace up to that step and then following your proposed chunk,
reaches a successful purchase.
The deployable_abstraction must be generic: no product ids, brands, titles, option values or
task ids from this task. Use status NO_PROPOSAL if no reusable repair exists."""


def redact(text: str) -> str:
    for pattern, replacement in _REDACTIONS:
        text = pattern.sub(replacement, text)
    return text


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SubmittedAbstraction(_Strict):
    failure_mechanism: str = Field(min_length=1, max_length=2000)
    applicable_when: str = Field(min_length=1, max_length=2000)
    observable_trigger: str = Field(min_length=1, max_length=2000)
    corrective_procedure: str = Field(min_length=1, max_length=2000)
    verification_step: str = Field(min_length=1, max_length=2000)
    target_chunk_id: int | None = None
    proposed_content: ChunkContent


class SubmittedCard(_Strict):
    """What `submit_failure_card` takes (the reference's card layout)."""

    status: Literal["PROPOSE_ADD", "PROPOSE_REWRITE", "NO_PROPOSAL"]
    privileged_audit: dict[str, Any] = Field(default_factory=dict)
    deployable_abstraction: SubmittedAbstraction | None = None


def _tool(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def _string(name: str) -> dict[str, Any]:
    return {"type": "object", "properties": {name: {"type": "string"}}, "required": [name]}


SEARCH = _tool("search", "Search the live shop (home page only).", _string("query"))
CLICK = _tool("click", "Click a clickable value of the live page.", _string("value"))
SUBMIT = _tool(
    "submit_failure_card",
    "Submit the failure card (ends the analysis).",
    {
        "type": "object",
        "properties": {"card": SubmittedCard.model_json_schema()},
        "required": ["card"],
    },
)


@dataclass
class LiveSession:
    """A fresh episode of the task; a purchase records a trial and opens the next episode."""

    env: Any
    task_id: str
    seed: int
    trials: list[dict[str, Any]] = field(default_factory=list)
    valid_actions: int = 0

    def __post_init__(self) -> None:
        self._open()

    def _open(self) -> None:
        self.episode, result = self.env.reset(self.task_id, seed=self.seed + len(self.trials))
        self.observation = result.observation
        self.state = result.state

    def act(self, action: str) -> str:
        if action.startswith("search[") and not self.state.search_available:
            return "search is only available on the home page"
        result = self.episode.step(action)
        self.valid_actions += int(bool(result.info.get("action_valid", True)))
        if not result.done:
            self.observation, self.state = result.observation, result.state
            return result.observation
        breakdown = result.breakdown
        trial = {
            "reward": result.reward,
            "success": bool(breakdown and breakdown.r_success == 1),
            "termination": breakdown.termination_reason if breakdown else None,
            "valid_actions": self.valid_actions,
        }
        self.trials.append(trial)
        self.valid_actions = 0
        self._open()
        return f"Trial ended: {json.dumps(trial)}. A fresh episode is open:\n{self.observation}"


class LLMAnalyst:
    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        max_rounds: int = 20,
        repairs: int = 3,
        timeout_s: float = 120.0,
        temperature: float = 0.6,
        max_tokens: int = 1024,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s)
        self.model, self.max_rounds, self.repairs = model, max_rounds, repairs
        self.temperature = temperature
        # One tool call is short; uncapped, SmolLM2 on vLLM rambled ~7k tokens for 6 minutes in
        # its first reply and the next request no longer fit the context (400).
        self.max_tokens = max_tokens

    @classmethod
    def from_settings(cls, settings) -> LLMAnalyst:
        if not (settings.llm_base_url and settings.llm_model):
            raise LookupError("the llm analyst needs ANALYST_LLM_BASE_URL and ANALYST_LLM_MODEL")
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
        return cls(settings.llm_base_url, settings.llm_model, api_key=key,
                   max_rounds=settings.llm_max_rounds, repairs=settings.llm_repairs,
                   timeout_s=settings.llm_timeout_s,
                   max_tokens=settings.llm_max_tokens)  # fmt: skip

    def analyze(self, request: AnalysisInput) -> CardCreate:
        task = request.env.task(request.trajectory.task_id)
        facts = read_trace(request.trajectory)
        catalog = request.env.world.catalog
        gold = gold_facts(task, facts, price=gold_price(task, catalog), catalog=catalog)
        session = LiveSession(request.env, task.task_id, request.seed)
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": self._brief(request, task, facts)},
        ]
        submitted, problems, repairs_left = None, [], self.repairs
        for round_index in range(self.max_rounds):
            last = round_index == self.max_rounds - 1
            tools = [SUBMIT] if last else [SEARCH, CLICK, SUBMIT]
            try:
                message = self._chat(messages, tools)
            except httpx.HTTPError as error:  # a slow or failing model is no card, never a crash
                problems.append(f"model server: {type(error).__name__}: {error}")
                break
            messages.append(message)
            calls = message.get("tool_calls") or []
            if not calls:
                messages.append({"role": "user", "content": "Call exactly one tool."})
                continue
            call = calls[0]
            name = call["function"]["name"]
            arguments = _arguments(call["function"].get("arguments"))
            reply, submitted, problem = self._run_tool(name, arguments, session, last)
            messages.append({"role": "tool", "tool_call_id": call.get("id", "0"), "content": reply})
            if submitted is not None:
                break
            if problem is not None:
                problems.append(problem)
                if name == "submit_failure_card":
                    repairs_left -= 1
                    if repairs_left < 0:
                        break
        return self._card(request, task, gold, session, submitted, problems)

    def _brief(self, request: AnalysisInput, task, facts) -> str:
        skill = render_skill_block(bank_chunks(request.bank)) or "(empty skill bank)"
        steps = []
        for index, step in enumerate(request.trajectory.steps):
            observation = (step.observation or "")[:MAX_OBSERVATION_CHARS]
            action = step.action or f"(refused: {step.reply[:80]})"
            steps.append(f"step {index}: {action}\n{observation}")
        purchase = next((v.title for v in facts.visits if v.product_id == facts.purchased), "")
        audit = {"goal": task.instruction, "gold_title": task.gold_title,
                 "gold_options": task.gold_options, "chosen_purchase": purchase,
                 "reward_components": request.trajectory.components}  # fmt: skip
        active = [{"chunk_id": e.chunk_id, "title": e.content.title} for e in request.bank]
        return (
            f"Current skill:\n{skill}\n\nActive chunks: {json.dumps(active)}\n\n"
            f"Failed full-skill trace (redacted):\n{redact(chr(10).join(steps))}\n\n"
            f"privileged_gold_audit: {json.dumps(audit, ensure_ascii=False)}\n\n"
            f"Live session, first page:\n{request.env.reset(task.task_id)[1].observation}"
        )

    def _chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict:
        body = {"model": self.model, "messages": messages, "tools": tools,
                "tool_choice": "auto", "temperature": self.temperature,
                "max_tokens": self.max_tokens}  # fmt: skip
        response = self.http.post("/chat/completions", json=body)
        response.raise_for_status()
        message = response.json()["choices"][0]["message"]
        return {"role": "assistant", "content": message.get("content") or "",
                "tool_calls": message.get("tool_calls") or []}  # fmt: skip

    def _run_tool(self, name, arguments, session: LiveSession, last: bool):
        """(reply, valid submitted card or None, problem or None)."""
        if name == "submit_failure_card":
            try:
                card = SubmittedCard.model_validate((arguments or {}).get("card"))
            except ValidationError as error:
                problem = f"invalid card: {error.errors()[0]['loc']}: {error.errors()[0]['msg']}"
                return f"{problem}. Fix it and call submit_failure_card again.", None, problem
            return "card received", card, None
        if last or name not in ("search", "click"):
            return "only submit_failure_card is available now", None, f"tool {name} refused"
        key = "query" if name == "search" else "value"
        value = str((arguments or {}).get(key, ""))
        return session.act(f"{name}[{value}]"), None, None

    def _card(self, request, task, gold, session, submitted, problems) -> CardCreate:
        outcome, deployable, audit = CardOutcome.NO_PROPOSAL, None, {}
        if submitted is not None:
            audit = dict(submitted.privileged_audit)
            outcome = {"PROPOSE_ADD": CardOutcome.ADD, "PROPOSE_REWRITE": CardOutcome.REWRITE,
                       "NO_PROPOSAL": CardOutcome.NO_PROPOSAL}[submitted.status]  # fmt: skip
            if submitted.deployable_abstraction is not None and outcome != CardOutcome.NO_PROPOSAL:
                deployable = DeployableAbstraction(**submitted.deployable_abstraction.model_dump())
            elif outcome != CardOutcome.NO_PROPOSAL:
                outcome = CardOutcome.NO_PROPOSAL
        verification = None
        if deployable is not None and deployable.proposed_content is not None:
            branch, problem = branch_step(audit, request.trajectory, task)
            audit["branch_step"] = branch
            if problem is not None:  # the trial branches at the rules' step instead
                audit["branch_step_problem"] = problem
            verification = verify(
                request, deployable.proposed_content, deployable.target_chunk_id, branch
            )
        audit.update({"gold_asin": task.gold_asin, "firewall_gold": gold.as_json(),
                      "protocol_problems": problems[-5:],
                      "diagnostic_trials": session.trials})  # fmt: skip
        card = finish_card(
            round=request.round, task_id=task.task_id, checkpoint_id=request.checkpoint_id,
            evidence_id=request.evidence_id, outcome=outcome, audit=audit, deployable=deployable,
            gold=gold, verification=verification, active=request.bank,
            cold_start=request.cold_start,
            extras={"backend": "llm", "model": self.model},
        )  # fmt: skip
        if submitted is None:
            card = card.model_copy(update={"forced_no_proposal_reason": "no valid card submitted"})
        return card

    def close(self) -> None:
        self.http.close()


def branch_step(audit: dict[str, Any], trajectory, task) -> tuple[int, str | None]:
    """Where the counterfactual branches, and why not where the card says (None: it is): the
    step the card names as the earliest divergence when it is a step of the trace (0-based,
    before the last), else the rules' earliest divergence, else the first step."""
    named = audit.get("earliest_divergence_step")
    steps = len(trajectory.steps)
    if isinstance(named, int) and not isinstance(named, bool) and 0 <= named < steps:
        return named, None
    found = diagnose(trajectory, task, read_trace(trajectory))
    fallback = found[0].step if found else 0
    if named is None:
        return fallback, "the card names no earliest_divergence_step"
    return fallback, f"earliest_divergence_step {named!r} is not a step of the {steps}-step trace"


def _arguments(raw: Any) -> dict[str, Any] | None:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw or "{}")
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


__all__: Sequence[str] = ("LLMAnalyst", "SubmittedCard", "redact")
