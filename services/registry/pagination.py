"""Limit/offset pagination shared by every listing."""

from __future__ import annotations

from typing import Annotated, TypeVar

from fastapi import Query
from pydantic import BaseModel

from services.registry.paths import Decimal
from shared.registry_api.schemas import MAX_ID, MAX_PAGE, Page

T = TypeVar("T")


class PageParams(BaseModel):
    limit: int
    offset: int


async def page_params(
    limit: Annotated[int, Decimal, Query(ge=1, le=MAX_PAGE)] = 50,
    offset: Annotated[int, Decimal, Query(ge=0, le=MAX_ID)] = 0,
) -> PageParams:
    return PageParams(limit=limit, offset=offset)


def page(items: list[T], total: int, limit: int, offset: int) -> Page[T]:
    """A `Page` with `next_offset` set while items remain."""
    next_offset = offset + len(items) if offset + len(items) < total else None
    return Page(items=items, total=total, limit=limit, offset=offset, next_offset=next_offset)
