"""Audit log: every registry write, newest first, filtered by object, actor, action and time."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import Response

from services.console.deps import Login
from services.console.views import render
from shared.contracts.registry_api.client import RegistryClient
from shared.contracts.registry_api.schemas import AuditEntryPublic

router = APIRouter()
PAGE = 50
Filter = Annotated[str | None, Query(max_length=64)]


def _time(value: str | None, name: str) -> str | None:
    """A form's date or date-time (UTC when no zone is given) as ISO 8601 for the registry."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        message = f"{name}: expected a date or a date and time, got {value!r}"
        raise HTTPException(422, message) from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).isoformat()


def _alias_reasons(registry: RegistryClient, entries: list[AuditEntryPublic]) -> dict[int, str]:
    """An alias write's reason lives in the alias history (revision by revision), not in the
    audit entry: join them so the log says why, not only who."""
    names = {e.object_id for e in entries if e.object_type == "alias"}
    by_revision = {
        (name, event.revision): event.reason
        for name in names
        for event in registry.alias_history(name)
    }
    return {
        e.id: by_revision[(e.object_id, e.after["revision"])]
        for e in entries
        if e.object_type == "alias"
        and isinstance(e.after, dict)
        and (e.object_id, e.after.get("revision")) in by_revision
    }


@dataclass(frozen=True)
class Change:
    key: str
    before: str
    after: str

    def link(self, value: str) -> str | None:
        """The page of the object an id field names (None for other fields and no value)."""
        page = ID_PAGES.get(self.key)
        return page.format(value) if page and value.isdigit() else None


def _scalar(value: Any) -> str | None:
    """A value short enough to read in a table cell; None for documents (left to the JSON)."""
    if isinstance(value, dict | list):
        return None
    text = "–" if value is None else str(value)
    return text if len(text) <= 80 else None


def changes(entry: AuditEntryPublic, limit: int = 6) -> list[Change]:
    """The fields a write changed, from -> to, where both are short scalars."""
    before = entry.before if isinstance(entry.before, dict) else {}
    after = entry.after if isinstance(entry.after, dict) else {}
    found = []
    for key in after.keys() | before.keys():
        if before.get(key) == after.get(key) or key in NOISE:
            continue
        old, new = _scalar(before.get(key)), _scalar(after.get(key))
        if old is not None and new is not None and (entry.before is not None or new != "–"):
            found.append(Change(key, old if entry.before is not None else "", new))
    return sorted(found, key=lambda change: (change.key not in FIRST, change.key))[:limit]


FIRST = {"bank_id", "status", "revision", "version", "round", "slug"}  # what a reader looks for
# Fields that hold an object's id, and the page that object has.
ID_PAGES = {
    "bank_id": "/banks/{}",
    "parent_bank_id": "/banks/{}",
    "base_bank_id": "/banks/{}",
    "chunk_id": "/chunks/{}",
    "target_chunk_id": "/chunks/{}",
    "gate_run_id": "/gates/{}",
    "candidate_id": "/candidates/{}",
    "card_id": "/cards/{}",
}
NOISE = {"etag", "updated_at", "created_at", "content_hash", "updated_by", "created_by"}


def object_link(entry: AuditEntryPublic) -> str | None:
    """The console page that shows the entry's object, where there is one."""
    after = entry.after if isinstance(entry.after, dict) else {}
    match entry.object_type:
        case "alias":
            return f"/banks#history-{entry.object_id}"
        case "bank":
            return f"/banks/{entry.object_id}"
        case "chunk":
            return f"/chunks/{entry.object_id}"
        case "chunk_version" if "chunk_id" in after:
            return f"/chunks/{after['chunk_id']}#version-{after.get('version', '')}"
        case "gate_run":
            return f"/gates/{entry.object_id}"
        case "gate_decision" if "gate_run_id" in after:
            return f"/gates/{after['gate_run_id']}"
        case "card":
            return f"/cards/{entry.object_id}"
        case "candidate":
            return f"/candidates/{entry.object_id}"
    return None


@router.get("/audit")
def audit_log(
    request: Request,
    session: Login,
    object_type: Filter = None,
    object_id: Filter = None,
    actor: Filter = None,
    action: Filter = None,
    since: Filter = None,
    until: Filter = None,
    page: Annotated[int, Query(ge=1, le=100_000)] = 1,
) -> Response:
    filters = {
        "object_type": object_type or None,
        "object_id": object_id or None,
        "actor": actor or None,
        "action": action or None,
        "since": _time(since, "since"),
        "until": _time(until, "until"),
    }
    registry = session.registry
    # The registry lists oldest first; page 1 here is the newest PAGE entries.
    total = registry.audit_page(limit=1, **filters).total
    end = max(total - (page - 1) * PAGE, 0)
    start = max(end - PAGE, 0)
    entries = registry.audit_page(limit=max(end - start, 1), offset=start, **filters).items
    entries = list(reversed(entries[: end - start]))
    reasons = _alias_reasons(registry, entries)
    given = {
        "object_type": object_type,
        "object_id": object_id,
        "actor": actor,
        "action": action,
        "since": since,
        "until": until,
    }
    return render(
        request,
        "audit.html",
        session,
        entries=entries,
        total=total,
        page=page,
        pages=max((total + PAGE - 1) // PAGE, 1),
        filters={k: v or "" for k, v in given.items()},
        query=urlencode({k: v for k, v in given.items() if v}),
        reasons=reasons,
        changes={e.id: changes(e) for e in entries},
        links={e.id: object_link(e) for e in entries},
    )
