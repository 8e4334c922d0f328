"""Every FastAPI dependency of the console, as `Annotated` aliases pages use directly."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from services.console.errors import CsrfRefused, NeedLogin
from services.console.sessions import COOKIE, Session, SessionStore
from services.console.settings import ConsoleSettings


def get_store(request: Request) -> SessionStore:
    return request.app.state.sessions


def get_settings(request: Request) -> ConsoleSettings:
    return request.app.state.settings


def current_session(request: Request) -> Session:
    """The logged-in user's session; otherwise the page redirects to the login form."""
    session = request.app.state.sessions.get(request.cookies.get(COOKIE))
    if session is None:
        raise NeedLogin
    return session


async def checked_form(request: Request) -> dict[str, str]:
    """A writing form's fields, refused (403) unless it echoes the session's CSRF token."""
    session = current_session(request)
    form = await request.form()
    fields = {key: value for key, value in form.items() if isinstance(value, str)}
    if not session.csrf_ok(fields.get("csrf")):
        raise CsrfRefused
    return fields


StoreDep = Annotated[SessionStore, Depends(get_store)]
SettingsDep = Annotated[ConsoleSettings, Depends(get_settings)]
Login = Annotated[Session, Depends(current_session)]
WriteForm = Annotated[dict[str, str], Depends(checked_form)]
