"""HTTP route for reading the audit log."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import AwareDatetime

from services.registry.audit import service
from services.registry.deps import Pagination, Reader, SessionDep
from services.registry.threads import run_read
from shared.registry_api.schemas import AuditEntryPublic, Page

router = APIRouter(tags=["audit"])


@router.get("/audit")
async def list_audit(
    session: SessionDep,
    _: Reader,
    paging: Pagination,
    object_type: Annotated[str | None, Query(max_length=32)] = None,
    object_id: Annotated[str | None, Query(max_length=64)] = None,
    actor: Annotated[str | None, Query(max_length=64)] = None,
    action: Annotated[str | None, Query(max_length=64)] = None,
    since: Annotated[AwareDatetime | None, Query(description="at or after (ISO 8601)")] = None,
    until: Annotated[AwareDatetime | None, Query(description="before (ISO 8601)")] = None,
) -> Page[AuditEntryPublic]:
    """Every write, oldest first: actor, role, action, object, before/after, time."""
    return await run_read(
        service.list_entries,
        session=session,
        object_type=object_type,
        object_id=object_id,
        actor=actor,
        action=action,
        since=since,
        until=until,
        limit=paging.limit,
        offset=paging.offset,
    )
