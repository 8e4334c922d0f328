"""Path and query parameter types shared by the routers (bounded, so a huge id is a 422, not a
DB error)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from shared.registry_api.schemas import MAX_ID

IdPath = Annotated[int, Path(ge=1, le=MAX_ID)]
NamePath = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")]
RoundQuery = Annotated[int | None, Query(ge=0, le=MAX_ID)]
