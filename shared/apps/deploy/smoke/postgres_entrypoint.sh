#!/usr/bin/env bash
# The postgres image's docker-entrypoint.sh, the part a first start runs, for the deploy smoke
# (shared/apps/deploy/smoke/postgres.py): initdb with the rendered POSTGRES_USER and POSTGRES_PASSWORD (local
# socket trust, every TCP client scram-sha-256, as the image sets it), POSTGRES_DB, the init
# scripts of /docker-entrypoint-initdb.d (INITDB_DIR) run against a server that listens on the
# socket only, then the server on TCP. PGHOST (the socket folder) and PGPORT (the Service's
# loopback port) are the smoke's.
set -euo pipefail
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile="$(mktemp)"
    printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
    initdb --username="$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust \
        --auth-host=scram-sha-256 -D "$PGDATA" > /dev/null
    rm -f "$pwfile"
    printf 'host all all all scram-sha-256\n' >> "$PGDATA/pg_hba.conf"
    pg_ctl -D "$PGDATA" -w start \
        -o "-c listen_addresses='' -c unix_socket_directories=$PGHOST -p $PGPORT"
    if [ "$POSTGRES_DB" != postgres ]; then
        psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
            -c "CREATE DATABASE \"$POSTGRES_DB\""
    fi
    for script in "$INITDB_DIR"/*; do
        case "$script" in
            *.sh) echo "running $script"; . "$script" ;;
            *.sql) echo "running $script"; psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" \
                --dbname "$POSTGRES_DB" -f "$script" ;;
        esac
    done
    pg_ctl -D "$PGDATA" -m fast -w stop
fi
exec postgres -D "$PGDATA" -c listen_addresses=127.0.0.1 -c unix_socket_directories="$PGHOST" \
    -p "$PGPORT"
