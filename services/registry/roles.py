"""Which database role the registry serves as: never one that could undo its history.

The append-only triggers (migrations 0002-0003) bind every role, but a superuser can switch
them off (`session_replication_role`) and a table's owner can drop or disable them. So the
server runs as an app role that owns nothing (`intraskill registry migrate --app-role`), and
`serve` refuses a superuser or an owner unless told `--allow-owner` (local runs, tests).
"""

from __future__ import annotations


def owner_rights(database_url: str) -> str | None:
    """Why the role of `database_url` could undo the registry's guarantees; None when it
    cannot (or the database has no roles: SQLite)."""
    from sqlalchemy import create_engine, text

    if not database_url.startswith("postgresql"):
        return None
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            superuser = connection.execute(
                text("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
            ).scalar()
            # Membership in the owning role carries the owner's rights, hence pg_has_role.
            owned = connection.execute(
                text(
                    "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() "
                    "AND pg_has_role(current_user, tableowner, 'USAGE')"
                )
            ).scalar()
            role = connection.execute(text("SELECT current_user")).scalar()
    finally:
        engine.dispose()
    if superuser:
        return f"role {role!r} is a superuser"
    if owned:
        return f"role {role!r} owns (or is a member of the owner of) {owned} registry tables"
    return None
