"""Init container of registry-migrate: create the registry's app role when it does not exist.

The registry serves as the app role (read and append; owns nothing) and the migrate Job grants
it its rights, so the role must exist before the grants: on a managed Postgres nobody else
creates it. Runs as the schema owner, which needs CREATEROLE (or the provider's equivalent) the
first time only; a role that exists is left as it is (its password is the secret store's).

    python ensure_app_role.py [--timeout SECONDS]
    # OWNER_DATABASE_URL: the owner's URL; APP_DATABASE_URL: the app role's (name, password)
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import psycopg
from psycopg import sql
from sqlalchemy.engine import make_url


def connect(url: str, timeout_s: float) -> psycopg.Connection:
    """The owner's connection, waiting (bounded) for a database that is still starting."""
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return psycopg.connect(dsn, autocommit=True, connect_timeout=10)
        except psycopg.OperationalError as error:
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"database not reachable after {timeout_s:.0f} s: {error}"
                ) from None
            print(f"waiting for the database: {error}".strip(), flush=True)
            time.sleep(3)


def ensure_role(connection: psycopg.Connection, role: str, password: str) -> bool:
    """Create `role` (login, no other attribute) unless it exists; True when it was created."""
    if connection.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
        return False
    # CREATE ROLE takes no bind parameters: the name and the password are quoted by psycopg
    statement = sql.SQL(
        "CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION PASSWORD {}"
    ).format(sql.Identifier(role), sql.Literal(password))
    connection.execute(statement)
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    app = make_url(os.environ["APP_DATABASE_URL"])
    if not (app.username and app.password):
        print("APP_DATABASE_URL names no role and password", file=sys.stderr)
        return 1
    with connect(os.environ["OWNER_DATABASE_URL"], args.timeout) as connection:
        try:
            created = ensure_role(connection, app.username, app.password)
        except psycopg.errors.InsufficientPrivilege as error:
            print(
                f"cannot create the app role {app.username!r}: {error}".strip()
                + " (give the schema owner CREATEROLE, or create the role yourself)",
                file=sys.stderr,
            )
            return 1
    print(f"app role {app.username!r} " + ("created" if created else "exists"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
