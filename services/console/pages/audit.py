"""Audit log: every registry write, newest first, filtered by object, actor, action and time."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import Response

from services.console.deps import Login
from services.console.views import render
from shared.registry_api.client import RegistryClient
from shared.registry_api.schemas import AuditEntryPublic

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
    )
