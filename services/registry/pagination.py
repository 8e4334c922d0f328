"""Limit/offset pagination shared by every listing."""

from __future__ import annotations

from typing import Annotated, TypeVar

from fastapi import Query
from pydantic import BaseModel

from services.registry.paths import Decimal
from shared.contracts.registry_api.schemas import MAX_ID, MAX_PAGE, Page

T = TypeVar("T")


class PageParams(BaseModel):
    limit: int
    offset: int


async def page_params(
    limit: Annotated[int, Decimal, Query(ge=1, le=MAX_PAGE)] = 50,
    offset: Annotated[int, Decimal, Query(ge=0, le=MAX_ID)] = 0,
) -> PageParams:
    return PageParams(limit=limit, offset=offset)


# A page also stops at about this many bytes of JSON (always one item at least): items may be
# large (a card up to the body limit), and `limit` alone let a page reach 50 MB.
MAX_PAGE_BYTES = 4 << 20


def _within_bytes(items: list[T]) -> list[T]:
    size = 0
    for count, item in enumerate(items):
        size += len(item.model_dump_json()) if isinstance(item, BaseModel) else 0
        if size > MAX_PAGE_BYTES and count > 0:
            return items[:count]
    return items


def page(items: list[T], total: int, limit: int, offset: int) -> Page[T]:
    """A `Page` of at most `limit` items and about `MAX_PAGE_BYTES`, with `next_offset` set
    while items remain."""
    items = _within_bytes(items)
    next_offset = offset + len(items) if offset + len(items) < total else None
    return Page(items=items, total=total, limit=limit, offset=offset, next_offset=next_offset)
