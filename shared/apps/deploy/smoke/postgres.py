"""The overlay's Postgres as its image starts it: `postgres_entrypoint.sh` (initdb with the
rendered user and password, local socket trust and scram-sha-256 for TCP, the init scripts)
on the Service's loopback port; ready when `pg_isready` (its exec probe) says so."""

from __future__ import annotations

import subprocess
from pathlib import Path

ENTRYPOINT = Path(__file__).with_name("postgres_entrypoint.sh")


def postgres_argv(port: int, env: dict[str, str], folders: dict[str, Path]) -> list[str]:
    """The entrypoint's command; `env` gets the server's port, its socket folder (the pod's
    /var/run/postgresql volume) and the init scripts' folder."""
    env |= {
        "PGPORT": str(port),
        "PGHOST": str(folders["/var/run/postgresql"]),
        "INITDB_DIR": str(folders["/docker-entrypoint-initdb.d"]),
    }
    return ["bash", str(ENTRYPOINT)]


def postgres_ready(port: int) -> bool:
    command = ["pg_isready", "-h", "127.0.0.1", "-p", str(port), "-q"]
    return subprocess.run(command, capture_output=True).returncode == 0
