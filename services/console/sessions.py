"""Logins: a server-side session per registry token, behind an opaque cookie.

The cookie carries only a random session id (HttpOnly, SameSite=Strict, Secure over TLS); the
registry token stays in this process. Each session holds its own `RegistryClient`, so every
page is fetched with the user's token and the registry decides what that role may see and do.
Each session also holds a CSRF token that every writing form must echo back.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from shared.contracts.registry_api.client import RegistryClient

COOKIE = "console_session"
LOGIN_COOKIE = "console_login"  # double-submit nonce for the login form (no session yet)
PRIVILEGED_ROLES = frozenset({"analyst", "operator"})  # may read cards' privileged audits


@dataclass
class Session:
    id: str
    name: str
    role: str
    registry: RegistryClient
    expires_at: float
    token: str = field(default="", repr=False)  # sent to the evaluator too (its gate jobs)
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    flash: list[str] = field(default_factory=list)

    @property
    def is_operator(self) -> bool:
        return self.role == "operator"

    @property
    def sees_privileged_audit(self) -> bool:
        return self.role in PRIVILEGED_ROLES

    def csrf_ok(self, token: str | None) -> bool:
        return token is not None and hmac.compare_digest(token, self.csrf)

    def pop_flash(self) -> list[str]:
        messages, self.flash = self.flash, []
        return messages


class TooManyLogins(Exception):
    """One user opened more logins in the last minute than the console allows."""


class SessionStore:
    """Sessions by id, each expiring `ttl_s` after login. A user holds at most `per_user`
    (their oldest is dropped) and opens at most `logins_per_minute`; beyond `limit` in all the
    oldest is dropped. The per-user bounds keep one token, a reader's too, from filling the
    store and pushing everyone else out."""

    def __init__(
        self, *, ttl_s: int, limit: int, per_user: int = 5, logins_per_minute: int = 10
    ) -> None:
        self._ttl_s, self._limit = ttl_s, limit
        self._per_user, self._per_minute = per_user, logins_per_minute
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._recent_logins: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _note_login(self, name: str, now: float) -> None:
        """Refuse (TooManyLogins) a user's login past the per-minute budget; else count it."""
        recent = self._recent_logins.setdefault(name, deque())
        while recent and recent[0] <= now - 60:
            recent.popleft()
        if len(recent) >= self._per_minute:
            raise TooManyLogins(name)
        recent.append(now)

    def _drop_oldest_of(self, name: str) -> None:
        mine = [sid for sid, s in self._sessions.items() if s.name == name]
        for session_id in mine[: max(len(mine) - self._per_user + 1, 0)]:
            self._sessions.pop(session_id).registry.close()

    def count(self) -> int:
        return len(self._sessions)

    def open(self, *, name: str, role: str, registry: RegistryClient, token: str = "") -> Session:
        with self._lock:
            self._note_login(name, time.monotonic())
        session = Session(
            id=secrets.token_urlsafe(32),
            name=name,
            role=role,
            registry=registry,
            expires_at=time.monotonic() + self._ttl_s,
            token=token,
        )
        with self._lock:
            self._drop_oldest_of(name)
            self._sessions[session.id] = session
            while len(self._sessions) > self._limit:
                _, dropped = self._sessions.popitem(last=False)
                dropped.registry.close()
        return session

    def get(self, session_id: str | None) -> Session | None:
        if not session_id:
            return None
        with self._lock:
            session = self._sessions.get(session_id)
        if session is not None and session.expires_at <= time.monotonic():
            self.close(session_id)
            return None
        return session

    def close(self, session_id: str) -> None:
        with self._lock:
            session = self._sessions.pop(session_id, None)
        if session is not None:
            session.registry.close()

    def close_all(self) -> None:
        for session_id in list(self._sessions):
            self.close(session_id)
