"""Live servers for tests: real `intraskill ... serve` subprocesses on free loopback ports
(started by `shared/kit/loopback.py`, as the trainer's and the demo's services are), and scratch
databases for them. The evaluator, analyst, operator and registry tests share these.

    with scratch_database("postgres", tmp_path) as database_url:
        with live_server(["registry", "serve", "--allow-owner"], {"DATABASE_URL": database_url},
                         log) as url:
            ...
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from shared.kit.loopback import ServiceProcess, free_port, start_service

REPO = Path(__file__).resolve().parents[1]
ADMIN_URL = os.environ.get("REGISTRY_TEST_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/test")


__all__ = [
    "free_port", "live_server", "scratch_database", "start_server", "started_server", "stop",
]  # fmt: skip


def _service(
    command: list[str], port: int, env: Mapping[str, str] | None, log: Path | None
) -> ServiceProcess:
    """`intraskill <command> --port <port>` from the repository root; output to `log` (or
    discarded). `env` adds to this process's environment; servers run BLAS single-threaded."""
    return start_service(
        command[0],
        [*command, "--port", str(port)],
        port=port,
        env={"OMP_NUM_THREADS": "1", **(env or {})},
        log=log if log is not None else Path(os.devnull),
        cwd=REPO,
    )


def start_server(
    command: list[str], port: int, env: Mapping[str, str] | None = None, log: Path | None = None
) -> subprocess.Popen:
    """The server's process, for tests that signal it themselves."""
    return _service(command, port, env, log).process


def stop(process: subprocess.Popen, timeout: float = 15.0) -> bool:
    """SIGTERM, then SIGKILL after `timeout` seconds; whether it stopped on SIGTERM."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return False
    return True


def started_server(
    command: list[str],
    env: Mapping[str, str] | None = None,
    log: Path | None = None,
    *,
    ready_path: str = "/healthz",
    timeout: float = 180.0,
) -> ServiceProcess:
    """`intraskill <command>` on a free port, once `ready_path` answers; the caller stops it."""
    service = _service(command, free_port(), env, log)
    service.ready_paths = (ready_path,)
    try:
        service.wait_ready(timeout=timeout)
    except BaseException:
        service.stop()
        raise
    return service


@contextmanager
def live_server(
    command: list[str],
    env: Mapping[str, str] | None = None,
    log: Path | None = None,
    *,
    ready_path: str = "/healthz",
    timeout: float = 180.0,
) -> Iterator[str]:
    """`intraskill <command>` on a free port until `ready_path` answers; yields its base URL
    and stops it on exit."""
    service = started_server(command, env, log, ready_path=ready_path, timeout=timeout)
    try:
        yield service.url
    finally:
        service.stop(grace=15.0)


@contextmanager
def scratch_postgres_database(admin_url: str = ADMIN_URL, *, prefix: str = "test") -> Iterator[str]:
    """A fresh, empty Postgres database, dropped afterwards; yields its URL. Skips the test when
    Postgres does not answer at `admin_url`."""
    psycopg = pytest.importorskip("psycopg")
    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    try:
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=3) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as error:
        pytest.skip(f"no Postgres at {admin_url}: {error}")
    try:
        yield f"{admin_url.rsplit('/', 1)[0]}/{name}"
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def scratch_database(kind: str, folder: Path, *, prefix: str = "test") -> Iterator[str]:
    """A fresh database of `kind` ("postgres" or "sqlite", a file in `folder`); yields its URL."""
    if kind == "sqlite":
        yield f"sqlite:///{folder / 'registry.sqlite'}"
        return
    with scratch_postgres_database(prefix=prefix) as url:
        yield url
