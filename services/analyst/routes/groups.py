"""All-wrong groups from the trainer (idempotent on run, round, step and group index), read
one at a time or a page at a time, and each round's funnel."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Response, status
from fastapi import Path as FastPath

from services.analyst.deps import READERS, SLUG, TRAINER, Context, Groups, shown_path
from services.analyst.store import GroupConflict, GroupQuotaFull
from shared.contracts.analyst_api.schemas import (
    AllWrongGroupPublic,
    AllWrongGroupSubmit,
    FunnelCounts,
    GroupStatus,
)
from shared.kit.auth import Principal
from shared.kit.service_jobs import now

router = APIRouter()
MAX_PAGE = 500  # groups per listing page
Round = Annotated[int, Query(ge=0, le=2**31 - 1)]


def shown(record: AllWrongGroupPublic, context: Context) -> AllWrongGroupPublic:
    """A group as callers see it: its trace named inside the data folder, never by a path on
    this server."""
    if record.retry_trace_uri is None:
        return record
    uri = shown_path(record.retry_trace_uri, context.settings.data_dir)
    return record.model_copy(update={"retry_trace_uri": uri})


@router.post(
    "/v1/all-wrong-groups",
    status_code=201,
    response_model=AllWrongGroupPublic,
    responses={409: {}, 429: {}},
)
def submit_group(
    body: AllWrongGroupSubmit,
    groups: Groups,
    context: Context,
    response: Response,
    caller: Annotated[Principal, TRAINER],
) -> AllWrongGroupPublic:
    """Record an all-wrong group (idempotent on run, round, step and group index). A caller
    writes at most ANALYST_MAX_GROUPS_PER_CALLER groups (429 past it: waiting frees nothing,
    so no Retry-After); a replay is not a write."""
    try:
        record = groups.submit(body, now(), caller.name)
    except GroupConflict as error:
        raise HTTPException(status.HTTP_409_CONFLICT, detail=str(error)) from None
    except GroupQuotaFull as error:
        raise HTTPException(status.HTTP_429_TOO_MANY_REQUESTS, detail=str(error)) from None
    if record.replayed:
        response.status_code = status.HTTP_200_OK
    response.headers["Location"] = f"/v1/all-wrong-groups/{record.id}"
    return shown(record, context)


@router.get(
    "/v1/all-wrong-groups/{group_id}",
    response_model=AllWrongGroupPublic,
    dependencies=[READERS],
)
def read_group(
    group_id: Annotated[str, FastPath(pattern=r"^awg-[0-9a-f]{20}$")],
    groups: Groups,
    context: Context,
) -> AllWrongGroupPublic:
    record = groups.get(group_id)
    if record is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no group {group_id!r}")
    return shown(record, context)


@router.get(
    "/v1/all-wrong-groups", response_model=list[AllWrongGroupPublic], dependencies=[READERS]
)
def list_groups(
    groups: Groups,
    context: Context,
    response: Response,
    run_id: Annotated[str | None, Query(pattern=SLUG)] = None,
    round: Annotated[int | None, Query(ge=0, le=2**31 - 1)] = None,
    status_filter: Annotated[GroupStatus | None, Query(alias="status")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    offset: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
) -> list[AllWrongGroupPublic]:
    """One page of the groups, by (round, step, group index); `X-Total-Count` says how many
    match."""
    matching = groups.ids(run_id=run_id, round=round, status=status_filter)
    response.headers["X-Total-Count"] = str(len(matching))
    page = groups.list(run_id=run_id, round=round, status=status_filter, offset=offset, limit=limit)
    return [shown(record, context) for record in page]


@router.get("/v1/funnel", response_model=FunnelCounts, dependencies=[READERS])
def funnel(
    groups: Groups, run_id: Annotated[str, Query(pattern=SLUG)], round: Round
) -> FunnelCounts:
    return groups.funnel(run_id, round)
