"""Init container of the registry: wait until the database schema is at Alembic's head.

The migrations Job (`intraskill registry migrate`) brings the schema up; a registry pod must not
serve before it has, nor against a schema newer or older than its own code. Exits 0 once the
database's revision equals the head revision shipped in this image, 1 after the timeout.

    python wait_for_schema.py [--timeout SECONDS]      # DATABASE_URL from the environment
"""

from __future__ import annotations

import argparse
import sys
import time

from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine

from services.registry.migrate import alembic_config
from services.registry.settings import RegistrySettings


def current_revision(url: str) -> str | None:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--interval", type=float, default=3.0)
    args = parser.parse_args()
    url = RegistrySettings().database_url
    head = ScriptDirectory.from_config(alembic_config(url)).get_current_head()
    deadline = time.monotonic() + args.timeout
    seen: str | None = None
    while True:
        try:
            seen = current_revision(url)
        except Exception as error:  # the database may not accept connections yet
            seen = f"unreachable ({type(error).__name__})"
        if seen == head:
            print(f"schema at head {head}")
            return 0
        if time.monotonic() > deadline:
            print(
                f"schema at {seen}, expected {head}: has the migrations Job run?", file=sys.stderr
            )
            return 1
        time.sleep(args.interval)


if __name__ == "__main__":
    raise SystemExit(main())
