"""Rendering: the Jinja2 environment, its filters, and the one `render` every page calls."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from services.console.sessions import Session

HERE = Path(__file__).resolve().parent
templates = Jinja2Templates(directory=HERE / "templates")  # autoescapes .html


def _number(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def when(value: datetime | None) -> str:
    """A moment in UTC, saying so (the registry stores UTC; a naive time is taken as UTC)."""
    if value is None:
        return "–"
    if value.tzinfo is not None:
        value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%d %H:%M:%S UTC")


def _signed(value: float | None, digits: int = 3) -> str:
    """An effect with its sign (+0.052, -0.010): which way it points is the point."""
    return "–" if value is None else f"{value:+.{digits}f}"


templates.env.filters["num"] = _number
templates.env.filters["signed"] = _signed
templates.env.filters["when"] = when


def render(
    request: Request,
    template: str,
    session: Session | None,
    *,
    status_code: int = 200,
    **context: Any,
) -> HTMLResponse:
    """A page: the template with the user's session (role, CSRF token, flash messages)."""
    flash = session.pop_flash() if session is not None else []
    return templates.TemplateResponse(
        request,
        template,
        {"session": session, "flash": flash, **context},
        status_code=status_code,
    )
