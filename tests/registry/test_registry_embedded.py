"""The embedded default: a SQLite file, migrated by Alembic, serving the same API; and the CLI."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import httpx
from fastapi.testclient import TestClient
from registry_support import CHINESE_CHUNK, chunk_content, free_port

from services.registry.app import create_app
from services.registry.cli import main as registry_cli
from services.registry.migrate import upgrade
from services.registry.settings import RegistrySettings
from shared.contracts.registry_api.schemas import Role
from shared.kit.auth import TokenGrant, hash_token


def test_sqlite_file_serves_the_lifecycle(tmp_path):
    url = f"sqlite:///{tmp_path / 'registry.sqlite'}"
    upgrade(url)
    upgrade(url)  # idempotent
    grant = TokenGrant(name="ops", role=Role.operator, token_sha256=hash_token("secret"))
    app = create_app(RegistrySettings(database_url=url, tokens=[grant]))
    auth = {"Authorization": "Bearer secret"}
    with TestClient(app) as client:
        chunk = client.post(
            "/v1/chunks", json={"slug": "zh", "content": CHINESE_CHUNK}, headers=auth
        ).json()
        assert chunk["latest"]["content"] == CHINESE_CHUNK
        entries = [{"chunk_version_id": chunk["latest"]["id"], "rho": 0.9}]
        bank = client.post("/v1/banks", json={"entries": entries}, headers=auth).json()
        assert client.post(f"/v1/banks/{bank['id']}/freeze", headers=auth).status_code == 200
        alias = client.post(
            "/v1/aliases",
            json={"name": "current", "bank_id": bank["id"], "reason": "r"},
            headers=auth,
        )
        assert alias.status_code == 201
        body = {"content": chunk_content("v2")}
        replay = {**auth, "Idempotency-Key": "k"}
        first = client.post(f"/v1/chunks/{chunk['id']}/versions", json=body, headers=replay)
        second = client.post(f"/v1/chunks/{chunk['id']}/versions", json=body, headers=replay)
        assert first.status_code == second.status_code == 201 and first.content == second.content
        response = client.get(f"/v1/banks/{bank['id']}", headers=auth)
        assert response.headers["etag"] == f'"{response.json()["content_hash"]}"'


def test_cli_migrate_and_token(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'cli.sqlite'}"
    assert registry_cli(["migrate", "--database-url", url]) == 0
    assert registry_cli(["token", "--name", "alice", "--role", "analyst"]) == 0
    out = capsys.readouterr().out
    token = re.search(r"token: (\S+)", out).group(1)
    grant = TokenGrant.model_validate_json(re.search(r"grant: (\{.*\})", out).group(1))
    assert grant.token_sha256 == hash_token(token) and grant.role == Role.analyst
    assert registry_cli(["token", "--name", "alice", "--role", "king"]) != 0


def test_serve_runs_the_embedded_demo(tmp_path):
    port = free_port()
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("REGISTRY_") and k != "DATABASE_URL"
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "shared.apps.cli", "registry", "serve", "--port", str(port)],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": os.getcwd()},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        token = None
        deadline = time.monotonic() + 60
        while token is None:
            assert time.monotonic() < deadline and process.poll() is None, "serve did not start"
            line = process.stdout.readline()
            match = re.search(r"operator token for this run: (\S+)", line)
            token = match.group(1) if match else None
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:
            while True:
                try:
                    if http.get("/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    assert time.monotonic() < deadline
                    time.sleep(0.1)
            assert http.get("/v1/banks").status_code == 401
            assert (
                http.get("/v1/banks", headers={"Authorization": f"Bearer {token}"}).json()["total"]
                == 0
            )
        assert (tmp_path / "runs" / "registry.sqlite").exists()
    finally:
        process.terminate()
        process.wait(timeout=10)
