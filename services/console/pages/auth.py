"""Login with a registry token, logout, and the front door."""

from __future__ import annotations

import hmac
import secrets
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response

from services.console.deps import Login, SettingsDep, StoreDep, WriteForm
from services.console.errors import CsrfRefused
from services.console.sessions import COOKIE, LOGIN_COOKIE, TooManyLogins
from services.console.settings import ConsoleSettings
from services.console.views import render
from shared.contracts.registry_api.client import AuthError, RegistryClient, RegistryError

router = APIRouter()


def _safe_next(target: str | None) -> str:
    """Only a path on this console: never an open redirect to another site."""
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/banks"


def _secure(request: Request, settings: ConsoleSettings) -> bool:
    if settings.cookie_secure is not None:
        return settings.cookie_secure
    return request.url.scheme == "https"


def _set_cookie(
    response: Response,
    request: Request,
    settings: ConsoleSettings,
    name: str,
    value: str,
    max_age: int,
) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        httponly=True,
        samesite="strict",
        secure=_secure(request, settings),
        path="/",
    )


def _login_form(
    request: Request,
    settings: ConsoleSettings,
    *,
    status_code: int = 200,
    error: str | None = None,
    next_path: str = "/banks",
    expired: bool = False,
) -> Response:
    nonce = secrets.token_urlsafe(24)
    response = render(
        request,
        "login.html",
        None,
        status_code=status_code,
        nonce=nonce,
        error=error,
        next_path=next_path,
        expired=expired,
    )
    _set_cookie(response, request, settings, LOGIN_COOKIE, nonce, 600)
    return response


@router.get("/")
def front_door() -> Response:
    return RedirectResponse("/banks", status_code=303)


@router.get("/login")
def login_page(
    request: Request, settings: SettingsDep, next: str | None = None, expired: bool = False
) -> Response:
    return _login_form(request, settings, next_path=_safe_next(next), expired=expired)


@router.post("/login")
def login(
    request: Request,
    settings: SettingsDep,
    store: StoreDep,
    token: Annotated[str, Form(max_length=512)],
    nonce: Annotated[str, Form(max_length=64)],
    next: Annotated[str, Form(max_length=2000)] = "/banks",
) -> Response:
    """Check the token with the registry (whoami) and open a session holding it."""
    cookie = request.cookies.get(LOGIN_COOKIE) or ""
    if not hmac.compare_digest(cookie, nonce):
        raise CsrfRefused
    registry = RegistryClient(
        settings.registry_url, token.strip(), timeout=settings.registry_timeout_s, retries=2
    )
    try:
        who = registry.whoami()
    except AuthError:
        registry.close()
        return _login_form(
            request,
            settings,
            status_code=401,
            next_path=_safe_next(next),
            error="The registry does not accept this token.",
        )
    except RegistryError:
        registry.close()
        raise
    try:
        session = store.open(
            name=who["name"], role=who["role"], registry=registry, token=token.strip()
        )
    except TooManyLogins:
        registry.close()
        return _login_form(
            request,
            settings,
            status_code=429,
            next_path=_safe_next(next),
            error="Too many logins with this token in the last minute; wait a minute.",
        )
    response = RedirectResponse(_safe_next(next), status_code=303)
    _set_cookie(response, request, settings, COOKIE, session.id, settings.session_ttl_s)
    response.delete_cookie(LOGIN_COOKIE, path="/")
    return response


@router.post("/logout")
def logout(session: Login, store: StoreDep, _: WriteForm) -> Response:
    store.close(session.id)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE, path="/")
    return response
