"""`intraskill console serve --run DIR`, the line `intraskill demo` ends with: a run folder's
registry served beside the console, and the operator token it prints lets one log in."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import httpx
import pytest

from services.registry.seed_demo import seed
from shared.contracts.registry_api.client import RegistryClient
from shared.kit.loopback import free_port, run_tokens, start_registry
from tests.live_servers import REPO, stop


@pytest.mark.slow  # two registry starts and a console: ~20 s idle, minutes on a loaded machine
def test_console_serves_a_demo_run_folder_and_prints_an_operator_token(tmp_path):
    tokens, grants = run_tokens(tmp_path)  # as the demo leaves them in its folder
    registry = start_registry(
        database_url=f"sqlite:///{tmp_path / 'registry.sqlite'}", grants=grants,
        log=tmp_path / "registry.log",
    )  # fmt: skip
    try:
        registry.wait_ready()
        with RegistryClient(registry.url, tokens["operator"]) as client:
            banks = seed(client).bank_ids
    finally:
        registry.stop()

    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "shared.apps.cli", "console", "serve", "--port", str(port),
         "--run", str(tmp_path)],
        cwd=REPO, env=os.environ.copy(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    try:
        token = None
        while token is None:
            line = process.stdout.readline()
            assert line, "console exited before printing the token"
            found = re.match(r"operator token for this run: (\S+)", line)
            token = found.group(1) if found else None
        assert token == tokens["operator"]
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/healthz").raise_for_status()
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        client = httpx.Client(base_url=url)
        nonce = re.search(r'name="nonce" value="([^"]+)"', client.get("/login").text).group(1)
        client.post("/login", data={"token": token, "nonce": nonce})
        page = client.get("/banks").text
        assert all(f'href="/banks/{bank}"' in page for bank in banks)
    finally:
        stop(process)
