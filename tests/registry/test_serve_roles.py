"""`intraskill registry serve` refuses a role that could undo its history (issue 20, blocker 5).

Real Postgres, real processes: the schema is migrated by an owner role (not a superuser) that
grants an app role read/append rights; serving as the superuser or as the owner is refused
unless `--allow-owner`, which then logs a warning; the app role serves.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.live_servers import ADMIN_URL, REPO, live_server, scratch_postgres_database

psycopg = pytest.importorskip("psycopg")


def as_role(url: str, role: str) -> str:
    return url.replace("postgresql://postgres@", f"postgresql://{role}@", 1)


@pytest.fixture(scope="module")
def roles() -> Iterator[dict[str, str]]:
    """Database URLs of the superuser, the schema owner and the app role, on a migrated db."""
    owner, app = f"registry_owner_{os.getpid()}", f"registry_app_{os.getpid()}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        for role in (owner, app):
            admin.execute(f"DROP ROLE IF EXISTS {role}")
            admin.execute(f"CREATE ROLE {role} LOGIN")
    try:
        with scratch_postgres_database(prefix="roles") as superuser_url:
            name = superuser_url.rsplit("/", 1)[1]
            with psycopg.connect(superuser_url, autocommit=True) as admin:
                admin.execute(f'ALTER DATABASE "{name}" OWNER TO {owner}')
                admin.execute(f"ALTER SCHEMA public OWNER TO {owner}")
            migrated = run(["migrate", "--app-role", app], as_role(superuser_url, owner))
            assert migrated.returncode == 0, migrated.stdout + migrated.stderr
            yield {
                "superuser": superuser_url,
                "owner": as_role(superuser_url, owner),
                "app": as_role(superuser_url, app),
            }
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            for role in (app, owner):
                admin.execute(f"DROP ROLE IF EXISTS {role}")


def run(args: list[str], database_url: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": database_url, "REGISTRY_TOKENS": "[]"}
    return subprocess.run(
        [sys.executable, "-m", "shared.apps.cli", "registry", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize(("who", "reason"), [("superuser", "superuser"), ("owner", "owns")])
def test_serving_as_a_superuser_or_an_owner_is_refused(roles, who, reason) -> None:
    served = run(["serve", "--no-migrate", "--port", "1"], roles[who])
    assert served.returncode == 2, served.stdout + served.stderr
    assert "refusing to serve" in served.stderr and reason in served.stderr


@pytest.mark.slow  # a server start on a loaded machine: ~30 s
def test_allow_owner_serves_with_a_warning(roles, tmp_path) -> None:
    log = tmp_path / "serve.log"
    env = {"DATABASE_URL": roles["owner"], "REGISTRY_TOKENS": "[]"}
    with live_server(["registry", "serve", "--no-migrate", "--allow-owner"], env, log):
        pass
    text = log.read_text()
    assert "serving with owner rights" in text and "owns" in text


@pytest.mark.slow
def test_the_app_role_serves(roles, tmp_path) -> None:
    log = tmp_path / "serve.log"
    env = {"DATABASE_URL": roles["app"], "REGISTRY_TOKENS": "[]"}
    with live_server(["registry", "serve", "--no-migrate"], env, log):
        pass
    assert "owner rights" not in log.read_text()


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "::"])
def test_without_grants_a_server_off_loopback_refuses_and_mints_nothing(roles, host) -> None:
    """A deployment binds every interface: with no REGISTRY_TOKENS it must not start on an
    operator token that only its log knows (issue 30)."""
    served = run(["serve", "--no-migrate", "--host", host, "--port", "1"], roles["app"])
    assert served.returncode == 2, served.stdout + served.stderr
    assert "refusing to serve" in served.stderr and "REGISTRY_TOKENS" in served.stderr
    assert "operator token for this run" not in served.stdout + served.stderr


def test_only_the_schema_owner_may_create_in_public(roles) -> None:
    """`migrate --app-role` revokes CREATE on `public` from PUBLIC (Postgres < 15 grants it)."""
    with psycopg.connect(roles["app"]) as app:
        assert app.execute("SELECT has_schema_privilege('public', 'CREATE')").fetchone() == (False,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app.execute("CREATE TABLE planted (x int)")
