"""A real `intraskill registry serve` process (one worker) for the live-server tests.

The in-process TestClient shares the test's event loop and thread pool; the defects these tests
pin (a hang under contention, SQLite writer pile-ups, database outages) only show against a
server process driven by independent clients over loopback, which is what this module starts.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
from registry_support import ACTORS, ADMIN_URL, TOKENS, chunk_content, free_port, headers

from shared.contracts.registry_api.schemas import Role
from tests.live_servers import REPO, scratch_postgres_database, started_server, stop

REPO_ROOT = REPO
INTRASKILL = Path(sys.executable).with_name("intraskill")


# Operator tokens the registry must refuse: one past its expiry, one revoked.
EXPIRED_TOKEN = "test-token-expired-operator"
REVOKED_TOKEN = "test-token-revoked-operator"
# Listed twice, once active and once revoked (issue 22): revoked must win.
TWICE_LISTED_TOKEN = "test-token-twice-listed-operator"


def token_grants() -> str:
    """REGISTRY_TOKENS: the test tokens of every role, plus an expired and a revoked one."""
    from shared.kit.auth import hash_token

    grants = [
        {"name": ACTORS[role], "role": role.value, "token_sha256": hash_token(TOKENS[role])}
        for role in Role
    ]
    grants += [
        {
            "name": "expired-bot",
            "role": "operator",
            "token_sha256": hash_token(EXPIRED_TOKEN),
            "expires_at": "2020-01-01T00:00:00Z",
        },
        {
            "name": "revoked-bot",
            "role": "operator",
            "token_sha256": hash_token(REVOKED_TOKEN),
            "revoked": True,
        },
    ]
    for revoked in (False, True):
        grants.append(
            {
                "name": "twice-listed-bot",
                "role": "operator",
                "token_sha256": hash_token(TWICE_LISTED_TOKEN),
                "revoked": revoked,
            }
        )
    return json.dumps(grants)


DATABASES = ("postgres", "sqlite")  # the live-server tests run on each


def unique(prefix: str) -> str:
    """A name no other test of a shared live server uses."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@dataclass
class LiveRegistry:
    url: str
    database_url: str
    process: subprocess.Popen

    def client(self, role: Role | None = Role.operator, **kwargs: Any) -> httpx.Client:
        kwargs.setdefault("timeout", 60)
        return httpx.Client(base_url=self.url, headers=headers(role), **kwargs)

    def call(self, method: str, path: str, role: Role = Role.operator, **kwargs: Any):
        with self.client(role) as http:
            return http.request(method, path, **kwargs)

    def ok(self, method: str, path: str, role: Role = Role.operator, **kwargs: Any) -> Any:
        response = self.call(method, path, role, **kwargs)
        assert response.status_code in (200, 201), (response.status_code, response.text)
        return response.json()

    # Factories, each through the API as an operator.
    def chunk(self, slug: str, **content: Any) -> dict:
        body = {"slug": slug, "content": chunk_content(slug, **content)}
        return self.ok("POST", "/v1/chunks", json=body)

    def bank(self, version_ids: list[int], *, freeze: bool = True, **fields: Any) -> dict:
        entries = [{"chunk_version_id": vid, "rho": 0.5} for vid in version_ids]
        bank = self.ok("POST", "/v1/banks", json={"entries": entries, **fields})
        if freeze:
            self.ok("POST", f"/v1/banks/{bank['id']}/freeze")
        return bank


@contextmanager
def serve_registry(database_url: str, **settings: str) -> Iterator[LiveRegistry]:
    """`intraskill registry serve` on a free port against `database_url`; stopped on exit.

    `settings` are extra REGISTRY_* variables (names without the prefix, e.g. max_body_bytes).
    """
    env = {
        "DATABASE_URL": database_url,
        "REGISTRY_TOKENS": token_grants(),
        **{f"REGISTRY_{name.upper()}": value for name, value in settings.items()},
    }
    service = started_server(
        ["registry", "serve", "--allow-owner"], env, ready_path="/readyz", timeout=240
    )
    try:
        yield LiveRegistry(service.url, database_url, service.process)
    finally:
        if not stop(service.process):
            raise AssertionError("registry did not stop on SIGTERM")


@contextmanager
def serve_as_app_role() -> Iterator[tuple[LiveRegistry, str]]:
    """A Postgres registry served as a role that owns nothing (`migrate --app-role`); yields
    it and the owner's URL."""
    role = f"registry_app_{os.getpid()}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f"DROP ROLE IF EXISTS {role}")
        admin.execute(f"CREATE ROLE {role} LOGIN")
    try:
        with scratch_postgres_database() as owner_url:
            migrated = subprocess.run(
                [str(INTRASKILL), "registry", "migrate", "--database-url", owner_url,
                 "--app-role", role],
                capture_output=True,
                text=True,
            )  # fmt: skip
            assert migrated.returncode == 0, migrated.stdout + migrated.stderr
            app_url = owner_url.replace("postgresql://postgres@", f"postgresql://{role}@", 1)
            with serve_registry(app_url) as live:
                yield live, owner_url
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f"DROP ROLE IF EXISTS {role}")


# ---------------------------------------------------------------- databases
# (scratch databases: tests.live_servers)


@dataclass
class ThrowawayCluster:
    """A Postgres cluster of its own (pg_createcluster) that a test may stop and start."""

    version: str
    name: str
    port: int

    @property
    def admin_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def ctl(self, action: str) -> None:
        subprocess.run(
            ["pg_ctlcluster", self.version, self.name, action, "--", "-m", "fast"]
            if action == "stop"
            else ["pg_ctlcluster", self.version, self.name, action],
            check=True,
            capture_output=True,
        )


def cluster_tools_missing() -> str | None:
    """Why a throwaway cluster cannot be made here, or None."""
    for tool in ("pg_createcluster", "pg_ctlcluster", "pg_dropcluster"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if not Path("/usr/lib/postgresql").is_dir():
        return "no Postgres server installed"
    return None


@contextmanager
def throwaway_cluster(port: int | None = None) -> Iterator[ThrowawayCluster]:
    """A new Postgres cluster on `port` (default: a free one) with trust auth on loopback;
    dropped afterwards."""
    version = sorted(Path("/usr/lib/postgresql").iterdir(), key=lambda p: int(p.name))[-1].name
    name = f"regfault{os.getpid()}{uuid.uuid4().hex[:4]}"
    cluster = ThrowawayCluster(version, name, port or free_port())
    subprocess.run(
        [
            "pg_createcluster", version, cluster.name, "--port", str(cluster.port),
            "--start", "--", "--auth-local=trust", "--auth-host=trust",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    try:
        yield cluster
    finally:
        subprocess.run(
            ["pg_dropcluster", "--stop", version, cluster.name], check=False, capture_output=True
        )


def cluster_processes(cluster: ThrowawayCluster) -> list[int]:
    """The postmaster's pid and those of all its children (backends, checkpointer, ...)."""
    data = Path(f"/var/lib/postgresql/{cluster.version}/{cluster.name}")
    postmaster = int((data / "postmaster.pid").read_text().split()[0])
    children = Path(f"/proc/{postmaster}/task/{postmaster}/children").read_text().split()
    return [postmaster, *map(int, children)]


@contextmanager
def frozen(cluster: ThrowawayCluster) -> Iterator[None]:
    """The whole cluster stopped with SIGSTOP (a host that stops answering but keeps its
    sockets open: the kernel still accepts connections), continued on exit."""
    pids = cluster_processes(cluster)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


# ---------------------------------------------------------------- concurrency


def concurrently(url: str, requests: list[dict[str, Any]], timeout_s: float = 120) -> list:
    """Send every request at once, each on a connection of its own; responses in order.

    A transport error (a reset connection, a timeout) is returned in place of its response.
    """

    async def run() -> list:
        limits = httpx.Limits(max_connections=len(requests), max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout_s) as http:
            gate = asyncio.Event()

            async def one(spec: dict[str, Any]):
                await gate.wait()
                try:
                    return await http.request(**spec)
                except httpx.TransportError as error:
                    return error

            tasks = [asyncio.create_task(one(spec)) for spec in requests]
            await asyncio.sleep(0)
            gate.set()
            return await asyncio.gather(*tasks)

    return asyncio.run(run())


def status_counts(responses: list) -> dict[int | str, int]:
    counts: dict[int | str, int] = {}
    for response in responses:
        key = (
            response.status_code
            if isinstance(response, httpx.Response)
            else type(response).__name__
        )
        counts[key] = counts.get(key, 0) + 1
    return counts
