"""Domain errors and how each becomes an HTTP answer: 4xx with a message, never a 500.

Service code raises these; the handlers registered in `install_error_handlers` turn them into
responses. 422s keep FastAPI's shape (`detail: [{loc, msg, type}]`) so every 422, whether
pydantic's or ours, names the field the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError, IntegrityError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from shared.kit.auth import install_auth_errors
from shared.kit.validation_errors import install_validation_errors


class RegistryError(Exception):
    status_code = 400

    def __init__(self, detail: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.headers = headers


class Forbidden(RegistryError):
    status_code = 403


class NotFound(RegistryError):
    status_code = 404

    def __init__(self, kind: str, key: object) -> None:
        super().__init__(f"{kind} {key!s} not found")


class Conflict(RegistryError):
    """An illegal transition (editing a frozen bank) or a lost race on a unique value."""

    status_code = 409


class PreconditionFailed(RegistryError):
    status_code = 412


class PreconditionRequired(RegistryError):
    status_code = 428


class IntegrityViolation(RegistryError):
    """Stored data fails its own check (a frozen bank's content hash): refuse to serve it."""

    status_code = 500


class PayloadTooLarge(RegistryError):
    status_code = 413


class ServiceUnavailable(RegistryError):
    """The database is down, locked past its timeout, or too busy: retry after a moment."""

    status_code = 503

    def __init__(self, detail: str, *, retry_after_s: int = 1) -> None:
        super().__init__(detail, headers={"Retry-After": str(retry_after_s)})


class FieldInvalid(RegistryError):
    """A 422 naming the field: `loc` as FastAPI writes it, e.g. ("body", "content", "verify")."""

    status_code = 422

    def __init__(self, loc: Sequence[str | int], message: str, kind: str = "value_error") -> None:
        super().__init__(message)
        self.loc = list(loc)
        self.kind = kind


def _registry_error(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RegistryError)
    if isinstance(error, FieldInvalid):
        content = {"detail": [{"loc": error.loc, "msg": error.detail, "type": error.kind}]}
    else:
        content = {"detail": error.detail}
    return JSONResponse(content, status_code=error.status_code, headers=error.headers)


def _integrity_error(_request: Request, error: Exception) -> JSONResponse:
    # A unique constraint lost to a concurrent writer (a version number, an alias revision,
    # an observation already recorded): the request conflicts with stored data, it is not a
    # server fault. Services translate the ones they expect with a clearer message.
    constraint = getattr(
        getattr(getattr(error, "orig", None), "diag", None), "constraint_name", None
    )
    detail = "conflicts with stored data" + (f" ({constraint})" if constraint else "")
    return JSONResponse({"detail": detail}, status_code=409)


def _data_error(_request: Request, error: Exception) -> JSONResponse:
    # The database refused a value the schemas let through (an out-of-range or unencodable
    # value deep in a free-form JSON document).
    return JSONResponse(
        {"detail": [{"loc": ["body"], "msg": "value rejected by storage", "type": "value_error"}]},
        status_code=422,
    )


def _database_unavailable(_request: Request, _error: Exception) -> JSONResponse:
    # The database refused a connection, dropped one, hit a lock or statement timeout, or every
    # pooled connection is busy: nothing the client sent is wrong, so it may retry.
    return JSONResponse(
        {"detail": "the database is unavailable or busy; retry shortly"},
        status_code=503,
        headers={"Retry-After": "1"},
    )


def install_error_handlers(app: FastAPI) -> None:
    install_auth_errors(app)  # 401 (no or a bad token) and 403 (role), as every service answers
    install_validation_errors(app)
    app.add_exception_handler(RegistryError, _registry_error)
    app.add_exception_handler(IntegrityError, _integrity_error)
    app.add_exception_handler(DataError, _data_error)
    for unavailable in (OperationalError, InterfaceError, PoolTimeout):
        app.add_exception_handler(unavailable, _database_unavailable)
