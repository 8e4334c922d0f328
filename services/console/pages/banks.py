"""Banks: the aliases and their history, each bank's chunks, the diff of any two banks, and
the operator actions on them (promote / roll back an alias, retire a bank)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated
from urllib.parse import quote, urlencode

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import RedirectResponse, Response

from services.console.deps import Login, WriteForm
from services.console.diffing import FieldDiff, chunk_diff
from services.console.errors import describe
from services.console.numbers import MEANINGS, included_counts
from services.console.sessions import Session
from services.console.views import render, when
from shared.contracts.registry_api.client import PreconditionFailed, RegistryClient
from shared.contracts.registry_api.schemas import (
    AliasEventPublic,
    AliasPublic,
    BankEntryPublic,
    BankPublic,
    BankSummary,
    DecisionPublic,
    DecisionRowPublic,
)

router = APIRouter()
BankId = Annotated[int, Query(ge=1, le=2**62)]


@dataclass(frozen=True)
class EntryRow:
    entry: BankEntryPublic
    coefficient: float | None
    ci: tuple[float, float] | None
    n: int | None  # observations of the admitting gate that included it


@dataclass(frozen=True)
class Rewrite:
    slug: str
    chunk_id: int
    from_version: int
    to_version: int
    fields: list[FieldDiff]


def all_banks(registry: RegistryClient):
    """Every bank's summary, newest first (one page holds 500)."""
    banks, offset = [], 0
    while offset is not None:
        page = registry.list_banks(limit=500, offset=offset)
        banks += page.items
        offset = page.next_offset
    return sorted(banks, key=lambda bank: bank.id, reverse=True)


def _decision_rows(registry: RegistryClient, decision_id: int | None):
    if decision_id is None:
        return None, {}
    decision = registry.get_decision(decision_id)
    return decision, {row.chunk_version_id: row for row in decision.rows}


def _interval(row: DecisionRowPublic | None, component: str) -> tuple[float, float] | None:
    if row is None or not row.ci_low or not row.ci_high or component not in row.ci_low:
        return None
    return row.ci_low[component], row.ci_high[component]


def entry_rows(registry: RegistryClient, bank: BankPublic) -> tuple[list[EntryRow], object]:
    """The bank's chunks in order with the admitting coefficient and its CI (primary reward)."""
    decision, rows = _decision_rows(registry, bank.gate_decision_id)
    component = decision.primary_component if decision else "r_strict"
    counts = {}
    if decision is not None:
        counts = included_counts(registry, registry.get_gate_run(decision.gate_run_id))
    out = []
    for entry in bank.entries:
        row = rows.get(entry.chunk_version_id)
        coefficient = entry.coefficient
        if coefficient is None and row is not None:
            coefficient = row.coefficients.get(component)
        out.append(
            EntryRow(
                entry, coefficient, _interval(row, component), counts.get(entry.chunk_version_id)
            )
        )
    return out, decision


def rollback_target(alias: AliasPublic, newest_first: list[AliasEventPublic]) -> int | None:
    """Where the registry's default roll back would point the alias: the bank its latest move
    came from (None after only a create, or when that is where it points already)."""
    if not newest_first:
        return None
    target = newest_first[0].from_bank_id
    return target if target is not None and target != alias.bank_id else None


@dataclass(frozen=True)
class GateResult:
    """A gate decision in one line: what it kept and how sure the fit was."""

    gate_id: int | None
    decision: DecisionPublic
    kept: int
    above_zero: int  # kept chunks whose 95% interval lies above zero
    largest: float | None

    @classmethod
    def of(cls, decision: DecisionPublic, gate_id: int | None) -> GateResult:
        component = decision.primary_component
        kept = [row for row in decision.rows if row.status.value == "selected"]
        intervals = [_interval(row, component) for row in kept]
        effects = [row.coefficients[component] for row in kept if component in row.coefficients]
        return cls(
            gate_id,
            decision,
            len(kept),
            sum(1 for ci in intervals if ci is not None and ci[0] > 0),
            max(effects, default=None),
        )


@dataclass(frozen=True)
class Promotion:
    event: AliasEventPublic
    result: GateResult | None  # the decision the move named, else the bank's admitting one


def promotions(
    registry: RegistryClient,
    history: dict[str, list[AliasEventPublic]],
    banks: list[BankSummary],
    gate_of: dict[int, int],
) -> list[Promotion]:
    """Every time an alias was pointed at a bank, newest first, with the test result behind it."""
    admitting = {bank.id: bank.gate_decision_id for bank in banks}
    results: dict[int, GateResult] = {}
    found = []
    for event in sorted((e for h in history.values() for e in h), key=lambda e: e.id):
        decision_id = event.gate_decision_id or admitting.get(event.to_bank_id)
        if decision_id is not None and decision_id not in results:
            results[decision_id] = GateResult.of(
                registry.get_decision(decision_id), gate_of.get(decision_id)
            )
        found.append(Promotion(event, results.get(decision_id) if decision_id else None))
    return list(reversed(found))


@router.get("/banks")
def banks_index(request: Request, session: Login) -> Response:
    registry = session.registry
    aliases = registry.list_aliases()
    history = {alias.name: list(reversed(registry.alias_history(alias.name))) for alias in aliases}
    banks = all_banks(registry)
    gate_of = gate_of_decision(registry)
    return render(
        request,
        "banks.html",
        session,
        aliases=aliases,
        history=history,
        targets={alias.name: rollback_target(alias, history[alias.name]) for alias in aliases},
        banks=banks,
        gate_of=gate_of,
        promotions=promotions(registry, history, banks, gate_of),
        meanings=MEANINGS,
    )


def gate_of_decision(registry: RegistryClient) -> dict[int, int]:
    """Each decision's gate run (a decision is shown, and linked, on its gate's page)."""
    return {g.decision_id: g.id for g in registry.list_gate_runs() if g.decision_id is not None}


@router.get("/banks/diff")
def bank_diff(
    request: Request,
    session: Login,
    from_bank: Annotated[int, Query(alias="from", ge=1, le=2**62)],
    to_bank: Annotated[int, Query(alias="to", ge=1, le=2**62)],
) -> Response:
    """Added, retired and rewritten chunks from one bank to another; rewrites word by word."""
    registry = session.registry
    diff = registry.diff_banks(to_bank, against=from_bank)
    old, new = registry.get_bank(from_bank), registry.get_bank(to_bank)
    old_by_chunk = {entry.chunk_id: entry for entry in old.entries}
    new_by_chunk = {entry.chunk_id: entry for entry in new.entries}
    rewrites = [
        Rewrite(
            r.slug,
            r.chunk_id,
            r.from_version,
            r.to_version,
            chunk_diff(old_by_chunk[r.chunk_id].content, new_by_chunk[r.chunk_id].content),
        )
        for r in diff.rewritten
    ]
    return render(
        request,
        "bank_diff.html",
        session,
        diff=diff,
        old=old,
        new=new,
        rewrites=rewrites,
        added=[new_by_chunk[ref.chunk_id] for ref in diff.added],
        retired=[old_by_chunk[ref.chunk_id] for ref in diff.retired],
        banks=all_banks(registry),
        meanings=MEANINGS,
    )


@dataclass(frozen=True)
class Kept:
    """A form drawn again with what the operator typed: after "Someone moved it first", or
    after a login that had expired when the form was sent."""

    alias: str | None = None
    reason: str = ""
    problem: str | None = None  # the notice above the form (412)


def _bank_view(
    request: Request, session: Session, bank_id: int, kept: Kept, status_code: int = 200
) -> Response:
    registry = session.registry
    bank, summary = registry.get_bank(bank_id), registry.bank_summary(bank_id)
    rows, decision = entry_rows(registry, bank)
    aliases = registry.list_aliases()
    return render(
        request,
        "bank.html",
        session,
        status_code=status_code,
        bank=bank,
        summary=summary,
        rows=rows,
        decision=decision,
        aliases=aliases,
        pointing=[alias.name for alias in aliases if alias.bank_id == bank_id],
        kept=kept,
        meanings=MEANINGS,
    )


@router.get("/banks/{bank_id}")
def bank_page(
    request: Request,
    session: Login,
    bank_id: int,
    alias: Annotated[str | None, Query(max_length=64)] = None,
    reason: Annotated[str, Query(max_length=2000)] = "",
) -> Response:
    """A bank; `alias` and `reason` draw that alias's promote form with the reason filled in."""
    return _bank_view(request, session, bank_id, Kept(alias, reason))


def _rollback_view(
    request: Request, session: Session, name: str, kept: Kept, status_code: int = 200
) -> Response:
    registry = session.registry
    alias = registry.get_alias(name)
    target = rollback_target(alias, list(reversed(registry.alias_history(name))))
    if target is None:
        raise HTTPException(409, f"{name} has no earlier bank to roll back to")
    return render(
        request,
        "rollback.html",
        session,
        status_code=status_code,
        alias=alias,
        target=registry.bank_summary(target),
        diff=registry.diff_banks(target, against=alias.bank_id),
        kept=kept,
    )


@router.get("/aliases/{name}/rollback")
def rollback_confirmation(
    request: Request,
    session: Login,
    name: str,
    reason: Annotated[str, Query(max_length=2000)] = "",
) -> Response:
    """Before a roll back: which bank the alias goes back to, what that changes, a reason."""
    return _rollback_view(request, session, name, Kept(name, reason))


def _required(form: dict[str, str], *names: str) -> None:
    """422 naming every empty field a state change needs (if_match above all: no blind move)."""
    missing = [name for name in names if not form.get(name, "").strip()]
    if missing:
        raise HTTPException(422, "; ".join(f"{name}: required" for name in missing))


def _bank_id(form: dict[str, str]) -> int:
    """The form's bank id; 422 when it is not a whole number."""
    value = form.get("bank_id", "").strip()
    if not value.isdigit():
        raise HTTPException(422, f"bank_id: expected a bank number, got {value!r}")
    return int(value)


def _moved_first(session: Session, error: PreconditionFailed, name: str) -> str:
    """412: the sentence, and where the alias points now, so the operator can decide again."""
    _, headline, explanation = describe(error)
    now = session.registry.get_alias(name)
    return (
        f"{headline}. {explanation} {name} now points at bank {now.bank_id} (revision "
        f"{now.revision}, moved by {now.updated_by} at {when(now.updated_at)}). "
        "Your reason is kept below."
    )


@router.post("/aliases/{name}/move")
def move_alias(request: Request, session: Login, form: WriteForm, name: str) -> Response:
    """Promote: point the alias at a bank, compare-and-set on the ETag the page was read with."""
    _required(form, "bank_id", "reason", "if_match")
    bank_id, reason = _bank_id(form), form["reason"].strip()
    try:
        session.registry.move_alias(name, bank_id, reason=reason, if_match=form["if_match"])
    except PreconditionFailed as error:
        kept = Kept(name, reason, _moved_first(session, error, name))
        return _bank_view(request, session, bank_id, kept, status_code=412)
    session.flash.append(f"{name} now points at bank {bank_id}.")
    return RedirectResponse("/banks", status_code=303)


@router.post("/aliases/{name}/rollback")
def rollback_alias(request: Request, session: Login, form: WriteForm, name: str) -> Response:
    """Roll the alias back to the bank its confirmation page named, under that page's ETag."""
    _required(form, "bank_id", "reason", "if_match")
    bank_id, reason = _bank_id(form), form["reason"].strip()
    try:
        alias = session.registry.rollback_alias(
            name, reason=reason, bank_id=bank_id, if_match=form["if_match"]
        )
    except PreconditionFailed as error:
        kept = Kept(name, reason, _moved_first(session, error, name))
        return _rollback_view(request, session, name, kept, status_code=412)
    session.flash.append(f"{name} rolled back to bank {alias.bank_id}.")
    return RedirectResponse("/banks", status_code=303)


@router.post("/banks/{bank_id}/retire")
def retire_bank(session: Login, form: WriteForm, bank_id: int) -> Response:
    del form  # checked for its CSRF token; the retire itself takes no fields
    session.registry.retire_bank(bank_id)
    session.flash.append(f"Bank {bank_id} retired.")
    return RedirectResponse(f"/banks/{bank_id}", status_code=303)


def resume_path(path: str, form: dict[str, str]) -> str | None:
    """The page that draws the form a POST to `path` came from, with its typed reason: where
    a login that expired while the form was open resumes (a POST route cannot be a `next`)."""
    reason = form.get("reason", "")
    parts = path.strip("/").split("/")
    match parts:
        case ["aliases", name, "move"] if form.get("bank_id", "").isdigit():
            return f"/banks/{form['bank_id']}?" + urlencode({"alias": name, "reason": reason})
        case ["aliases", name, "rollback"]:
            return f"/aliases/{quote(name)}/rollback?" + urlencode({"reason": reason})
        case ["banks", bank_id, "retire"]:
            return f"/banks/{quote(bank_id)}"
    return None
