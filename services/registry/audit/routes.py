"""HTTP route for reading the audit log."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import AfterValidator, AwareDatetime

from services.registry.audit import service
from services.registry.deps import Pagination, Reader, SessionDep
from services.registry.threads import run_read
from shared.contracts.registry_api.schemas import AuditEntryPublic, Page

router = APIRouter(tags=["audit"])


def _in_utc(value: datetime) -> datetime:
    # 0001-01-01T00:00:00+00:01 is a valid time whose UTC instant falls before year 1: refused
    # here (422) instead of overflowing where the database bind converts it.
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("the time is out of range once converted to UTC") from None


TimeBound = Annotated[AwareDatetime, AfterValidator(_in_utc)]


@router.get("/audit")
async def list_audit(
    session: SessionDep,
    _: Reader,
    paging: Pagination,
    object_type: Annotated[str | None, Query(max_length=32)] = None,
    object_id: Annotated[str | None, Query(max_length=64)] = None,
    actor: Annotated[str | None, Query(max_length=64)] = None,
    action: Annotated[str | None, Query(max_length=64)] = None,
    since: Annotated[TimeBound | None, Query(description="at or after (ISO 8601)")] = None,
    until: Annotated[TimeBound | None, Query(description="before (ISO 8601)")] = None,
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
