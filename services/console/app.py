"""The console's FastAPI application factory."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import quote, urlencode

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from services.console.deps import current_session
from services.console.errors import CsrfRefused, NeedLogin, describe
from services.console.pages import audit, auth, banks, chunks, episodes, gates, review
from services.console.sessions import SessionStore
from services.console.settings import ConsoleSettings, get_settings
from services.console.views import HERE, render
from shared.contracts.registry_api.client import RegistryError
from shared.kit.observability import instrument

log = logging.getLogger("intraskill.console")

# No scripts at all: the pages are plain HTML forms. Inline SVG needs no script either.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


def _session_or_none(request: Request):
    try:
        return current_session(request)
    except NeedLogin:
        return None


def _error_page(request: Request, status: int, headline: str, explanation: str) -> Response:
    return render(
        request,
        "error.html",
        _session_or_none(request),
        status_code=status,
        headline=headline,
        explanation=explanation,
    )


def _install_error_pages(app: FastAPI) -> None:
    @app.exception_handler(NeedLogin)
    async def need_login(request: Request, _: NeedLogin) -> Response:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        if request.method == "POST":
            # A form sent after the login expired: log in, then see that form again with the
            # reason typed into it (nothing was sent to the registry).
            form = await request.form()
            fields = {k: v for k, v in form.items() if isinstance(v, str) and k != "csrf"}
            resume = banks.resume_path(request.url.path, fields)
            target = resume or "/banks"
            query = urlencode({"next": target, "expired": "1"})
            return RedirectResponse(f"/login?{query}", status_code=303)
        return RedirectResponse(f"/login?next={quote(target)}", status_code=303)

    @app.exception_handler(CsrfRefused)
    async def csrf_refused(request: Request, _: CsrfRefused) -> Response:
        return _error_page(
            request,
            403,
            "Form refused",
            (
                "The form did not carry this session's CSRF token, so nothing was sent to the "
                "registry. Reload the page and submit it from the console."
            ),
        )

    @app.exception_handler(RegistryError)
    async def registry_error(request: Request, error: RegistryError) -> Response:
        status, headline, explanation = describe(error)
        return _error_page(request, status, headline, explanation)

    @app.exception_handler(ValidationError)
    async def invalid_input(request: Request, error: ValidationError) -> Response:
        # The registry client checks a request before sending it: the same 422 the registry
        # would give, naming the field.
        fields = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors()
        )
        return _error_page(request, 422, "The input was not accepted", fields)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError) -> Response:
        # A malformed path or query parameter (/banks/abc, ?offset=-1): a page, not JSON.
        fields = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'] if p not in ('path', 'query', 'body'))}: "
            f"{e['msg']}"
            for e in error.errors()
        )
        return _error_page(request, 422, "The request was not understood", fields)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> Response:
        return _error_page(request, error.status_code, "Cannot show this page", str(error.detail))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, error: Exception) -> Response:
        log.exception("console error on %s", request.url.path)  # the trace stays in the log
        return _error_page(
            request,
            500,
            "Something went wrong in the console",
            ("The error was logged. Try again; if it persists, tell whoever runs the console."),
        )


def create_app(settings: ConsoleSettings | None = None) -> FastAPI:
    """A console bound to `settings` (default: read from the environment)."""
    settings = settings or get_settings()
    store = SessionStore(
        ttl_s=settings.session_ttl_s,
        limit=settings.max_sessions,
        per_user=settings.max_sessions_per_user,
        logins_per_minute=settings.logins_per_minute,
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        store.close_all()

    app = FastAPI(
        title="IntraSkill operator console",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.sessions = store

    @app.middleware("http")
    async def security_headers(request: Request, call_next) -> Response:
        response = await call_next(request)
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    _install_error_pages(app)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    for page in (auth, banks, chunks, gates, review, episodes, audit):
        app.include_router(page.router)

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    # last, so outermost: counts and times every page and the pages' middleware (the
    # monitoring component scrapes /metrics)
    metrics = instrument(
        app, "console", metrics_port=settings.metrics_port, metrics_host=settings.metrics_host
    )
    metrics.gauge_from("console_sessions", "logins held now", store.count)

    return app
