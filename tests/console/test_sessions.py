"""The console's login store: per-user bounds keep one token from pushing everyone else out."""

from __future__ import annotations

import pytest

from services.console.sessions import SessionStore, TooManyLogins


class StubRegistryClient:
    """TEST DOUBLE for the RegistryClient a session holds: the store only ever closes it."""

    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def open_as(store: SessionStore, name: str, role: str = "reader"):
    return store.open(name=name, role=role, registry=StubRegistryClient())


def test_one_user_logging_in_again_and_again_keeps_only_their_own_newest_sessions():
    store = SessionStore(ttl_s=3600, limit=4, per_user=2, logins_per_minute=100)
    operator = open_as(store, "ops", "operator")
    readers = [open_as(store, "reader-bot") for _ in range(6)]
    assert store.get(operator.id) is operator  # never pushed out by another user's logins
    assert [store.get(s.id) is not None for s in readers] == [False] * 4 + [True] * 2
    assert all(s.registry.closed for s in readers[:4]) and store.count() == 3


def test_a_user_past_the_per_minute_login_budget_is_refused():
    store = SessionStore(ttl_s=3600, limit=100, per_user=10, logins_per_minute=3)
    for _ in range(3):
        open_as(store, "reader-bot")
    with pytest.raises(TooManyLogins):
        open_as(store, "reader-bot")
    assert open_as(store, "someone-else")  # the budget is per user
