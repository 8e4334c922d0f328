"""Path and query parameter types shared by the routers.

Ids and counts in URLs are strict: bounded (a huge id is a 422, not a database error) and
written in plain decimal, so `+1`, `01` or `%201` are a 422 rather than another spelling of 1
(one resource, one URL: caches, audit filters and logs key on the text).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import Path, Query
from pydantic import BeforeValidator

from shared.contracts.registry_api.schemas import MAX_ID

_PLAIN_DECIMAL = re.compile(r"0|[1-9][0-9]{0,18}")


def plain_decimal(value: Any) -> Any:
    """Refuse any spelling of a number but its plain decimal digits (the URL's raw text)."""
    if isinstance(value, str) and not _PLAIN_DECIMAL.fullmatch(value):
        raise ValueError("must be written in plain decimal digits (no sign, space or leading 0)")
    return value


Decimal = BeforeValidator(plain_decimal)
IdPath = Annotated[int, Decimal, Path(ge=1, le=MAX_ID)]
IdQuery = Annotated[int, Decimal, Query(ge=1, le=MAX_ID)]
OptionalIdQuery = Annotated[int | None, Decimal, Query(ge=1, le=MAX_ID)]
NamePath = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")]
RoundQuery = Annotated[int | None, Decimal, Query(ge=0, le=MAX_ID)]
