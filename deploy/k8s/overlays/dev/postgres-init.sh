#!/bin/sh
# Dev only, run once by the Postgres image on an empty data folder (/docker-entrypoint-initdb.d):
# the registry's schema owner (migrations) and its app role (serving; owns nothing). The
# superuser POSTGRES_USER stays with the database container.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<SQL
CREATE ROLE intraskill_owner LOGIN PASSWORD '$OWNER_PASSWORD';
CREATE ROLE intraskill_app LOGIN PASSWORD '$APP_PASSWORD';
ALTER DATABASE "$POSTGRES_DB" OWNER TO intraskill_owner;
ALTER SCHEMA public OWNER TO intraskill_owner;
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
SQL
