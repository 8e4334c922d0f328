"""The 422 every IntraSkill service answers for a request that does not validate: FastAPI's
error list, with the echoed input made encodable. A body may hold what JSON text can carry but
an answer cannot (NaN and Infinity, which Python's parser accepts; a lone surrogate escape):
echoed as is, the error answer itself would fail (a 500)."""

from __future__ import annotations

import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse


def json_safe(value: Any) -> Any:
    """Echo input the 422 body can hold: NaN as text, lone surrogates as escapes."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {json_safe(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    return value


def validation_error(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    detail = json_safe(jsonable_encoder(error.errors()))
    return JSONResponse({"detail": detail}, status_code=422)


def install_validation_errors(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, validation_error)
