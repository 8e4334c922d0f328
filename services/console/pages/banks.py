"""Banks: the aliases and their history, each bank's chunks, the diff of any two banks, and
the operator actions on them (promote / roll back an alias, retire a bank)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import RedirectResponse, Response

from services.console.deps import Login, WriteForm
from services.console.diffing import FieldDiff, chunk_diff
from services.console.errors import describe
from services.console.sessions import Session
from services.console.views import render
from shared.registry_api.client import PreconditionFailed, RegistryClient
from shared.registry_api.schemas import BankEntryPublic, BankPublic, DecisionRowPublic

router = APIRouter()
BankId = Annotated[int, Query(ge=1, le=2**62)]


@dataclass(frozen=True)
class EntryRow:
    entry: BankEntryPublic
    coefficient: float | None
    ci: tuple[float, float] | None


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
    out = []
    for entry in bank.entries:
        row = rows.get(entry.chunk_version_id)
        coefficient = entry.coefficient
        if coefficient is None and row is not None:
            coefficient = row.coefficients.get(component)
        out.append(EntryRow(entry, coefficient, _interval(row, component)))
    return out, decision


@router.get("/banks")
def banks_index(request: Request, session: Login) -> Response:
    registry = session.registry
    aliases = registry.list_aliases()
    history = {alias.name: list(reversed(registry.alias_history(alias.name))) for alias in aliases}
    return render(
        request,
        "banks.html",
        session,
        aliases=aliases,
        history=history,
        banks=all_banks(registry),
    )


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
    )


@router.get("/banks/{bank_id}")
def bank_page(request: Request, session: Login, bank_id: int) -> Response:
    registry = session.registry
    bank, summary = registry.get_bank(bank_id), registry.bank_summary(bank_id)
    rows, decision = entry_rows(registry, bank)
    aliases = registry.list_aliases()
    return render(
        request,
        "bank.html",
        session,
        bank=bank,
        summary=summary,
        rows=rows,
        decision=decision,
        aliases=aliases,
        pointing=[alias.name for alias in aliases if alias.bank_id == bank_id],
    )


def _reason(form: dict[str, str]) -> str:
    return form.get("reason", "").strip()


def _bank_id(form: dict[str, str]) -> int | None:
    """The form's bank id (None when left empty); 422 when it is not a whole number."""
    value = form.get("bank_id", "").strip()
    if not value:
        return None
    if not value.isdigit():
        raise HTTPException(422, f"bank_id: expected a bank number, got {value!r}")
    return int(value)


def _moved_first(request: Request, session: Session, error: PreconditionFailed, name: str):
    """412: show where the alias points now, so the operator can decide again."""
    status, headline, explanation = describe(error)
    now = session.registry.get_alias(name)
    return render(
        request,
        "error.html",
        session,
        status_code=status,
        headline=headline,
        explanation=f"{explanation} `{name}` now points at bank {now.bank_id} "
        f"(revision {now.revision}, moved by {now.updated_by}).",
    )


@router.post("/aliases/{name}/move")
def move_alias(request: Request, session: Login, form: WriteForm, name: str) -> Response:
    """Promote: point the alias at a bank, compare-and-set on the ETag the page was read with."""
    try:
        session.registry.move_alias(
            name,
            _bank_id(form) or 0,
            reason=_reason(form),
            if_match=form.get("if_match", ""),
        )
    except PreconditionFailed as error:
        return _moved_first(request, session, error, name)
    session.flash.append(f"{name} now points at bank {form.get('bank_id')}.")
    return RedirectResponse("/banks", status_code=303)


@router.post("/aliases/{name}/rollback")
def rollback_alias(request: Request, session: Login, form: WriteForm, name: str) -> Response:
    """Roll the alias back to the bank it pointed at before (or the bank named in the form)."""
    try:
        alias = session.registry.rollback_alias(
            name,
            reason=_reason(form),
            bank_id=_bank_id(form),
            if_match=form.get("if_match") or None,
        )
    except PreconditionFailed as error:
        return _moved_first(request, session, error, name)
    session.flash.append(f"{name} rolled back to bank {alias.bank_id}.")
    return RedirectResponse("/banks", status_code=303)


@router.post("/banks/{bank_id}/retire")
def retire_bank(session: Login, form: WriteForm, bank_id: int) -> Response:
    del form  # checked for its CSRF token; the retire itself takes no fields
    session.registry.retire_bank(bank_id)
    session.flash.append(f"Bank {bank_id} retired.")
    return RedirectResponse(f"/banks/{bank_id}", status_code=303)
