"""Registry answers that are not a success, as messages an operator can act on.

Every page handler lets `RegistryError` propagate; the handlers here turn it into an error page
with the registry's status code and a sentence, never a stack trace.
"""

from __future__ import annotations

from typing import Any

from shared.contracts.registry_api.client import (
    AuthError,
    Conflict,
    Invalid,
    NotFound,
    PreconditionFailed,
    RegistryError,
    Unavailable,
)


class NeedLogin(Exception):
    """No valid session: the page redirects to the login form."""


class CsrfRefused(Exception):
    """A writing form without this session's CSRF token."""


def _field_messages(detail: Any) -> str:
    """422 details name the field the way FastAPI does: `loc` then `msg`."""
    if not isinstance(detail, list):
        return str(detail)
    parts = []
    for item in detail:
        if isinstance(item, dict):
            loc = ".".join(str(p) for p in item.get("loc", []) if p != "body")
            parts.append(f"{loc}: {item.get('msg', '')}" if loc else str(item.get("msg", "")))
        else:
            parts.append(str(item))
    return "; ".join(parts)


def describe(error: RegistryError) -> tuple[int, str, str]:
    """(status code, headline, explanation) for a registry error."""
    detail = _field_messages(error.detail)
    if isinstance(error, PreconditionFailed):
        return (
            412,
            "Someone moved it first",
            (
                "The alias changed after this page was loaded, so nothing was changed. "
                "Reload the page, check where it points now, and decide again."
            ),
        )
    if isinstance(error, AuthError) and error.status_code == 403:
        return 403, "Not allowed for your role", f"The registry refused this: {detail}"
    if isinstance(error, AuthError):
        return 401, "Your token is no longer accepted", f"The registry said: {detail}"
    if isinstance(error, NotFound):
        return 404, "Not found", f"The registry has no such object: {detail}"
    if isinstance(error, Conflict):
        return 409, "Not possible in its current state", f"The registry refused: {detail}"
    if isinstance(error, Invalid):
        return 422, "The registry did not accept the input", detail
    if isinstance(error, Unavailable):
        return (
            503,
            "The registry is not answering",
            ("The registry could not be reached or kept failing; try again in a moment."),
        )
    return error.status_code or 502, "The registry refused the request", detail
