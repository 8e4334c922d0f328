"""registry-migrate's init container (issue 30): the app role is created by the deployment
when it does not exist, as the schema owner, on a real Postgres (REGISTRY_TEST_ADMIN_URL)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

psycopg = pytest.importorskip("psycopg")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "deploy" / "k8s" / "base" / "scripts" / "ensure_app_role.py"
ADMIN_URL = os.environ.get("REGISTRY_TEST_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/test")
HOST = ADMIN_URL.split("@", 1)[1]  # host:port/db


@pytest.fixture
def roles() -> Iterator[dict[str, str]]:
    """A schema owner with CREATEROLE, one without, and the name of an app role not yet there."""
    suffix = uuid.uuid4().hex[:8]
    names = {"owner": f"owner_{suffix}", "plain": f"plain_{suffix}", "app": f"app_{suffix}"}
    try:
        admin = psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as error:
        pytest.skip(f"no Postgres at {ADMIN_URL}: {error}")
    with admin:
        admin.execute(f"CREATE ROLE {names['owner']} LOGIN CREATEROLE PASSWORD 'o'")
        admin.execute(f"CREATE ROLE {names['plain']} LOGIN PASSWORD 'p'")
    yield names
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        for name in names.values():
            admin.execute(f"DROP ROLE IF EXISTS {name}")


def ensure(owner: str, app: str, password: str = "app-pass'word") -> subprocess.CompletedProcess:
    from urllib.parse import quote

    env = {
        **os.environ,
        "OWNER_DATABASE_URL": f"postgresql://{owner}:x@{HOST}",
        "APP_DATABASE_URL": f"postgresql://{app}:{quote(password, safe='')}@{HOST}",
    }
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--timeout", "5"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip


def role(name: str) -> tuple | None:
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        return admin.execute(
            "SELECT rolcanlogin, rolsuper, rolcreaterole, rolcreatedb, rolpassword IS NOT NULL"
            " FROM pg_authid WHERE rolname = %s",
            (name,),
        ).fetchone()


def test_creates_a_missing_app_role_once_as_a_plain_login_role(roles) -> None:
    first = ensure(roles["owner"], roles["app"])
    assert first.returncode == 0, first.stderr
    assert f"app role '{roles['app']}' created" in first.stdout
    # login, no superuser, no CREATEROLE, no CREATEDB, with its password (quote and all)
    assert role(roles["app"]) == (True, False, False, False, True)
    again = ensure(roles["owner"], roles["app"])
    assert again.returncode == 0 and f"app role '{roles['app']}' exists" in again.stdout


def test_an_owner_without_createrole_fails_with_what_it_needs(roles) -> None:
    done = ensure(roles["plain"], roles["app"])
    assert done.returncode == 1 and "CREATEROLE" in done.stderr
    assert role(roles["app"]) is None


def test_an_existing_role_is_left_as_it_is_even_for_an_owner_without_createrole(roles) -> None:
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {roles['app']} LOGIN PASSWORD 'kept'")
    done = ensure(roles["plain"], roles["app"])
    assert done.returncode == 0 and "exists" in done.stdout
