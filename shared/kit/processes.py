"""Services as real child processes on loopback: start, wait until ready, stop every one.

Children start in their own session, so a Ctrl-C at the terminal reaches only the demo, which
then stops them in order (SIGTERM, then SIGKILL after a grace period) instead of leaving them
half-dead.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROLES = ("operator", "trainer", "evaluator", "analyst", "reader")


def free_port() -> int:
    """A port nobody listens on now (other jobs run servers too: never a fixed one)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def mint_tokens(prefix: str = "demo") -> tuple[dict[str, str], list[dict[str, str]]]:
    """One token per registry role, and the grants (sha256 only) the registry is started with."""
    tokens = {role: f"{prefix}-{role}-{secrets.token_urlsafe(16)}" for role in ROLES}
    grants = [
        {
            "name": f"{prefix}-{role}",
            "role": role,
            "token_sha256": hashlib.sha256(token.encode()).hexdigest(),
        }
        for role, token in tokens.items()
    ]
    return tokens, grants


class ServiceFailed(RuntimeError):
    """A child service exited or never became ready; the message carries its log's tail."""


@dataclass
class ServiceProcess:
    """One child service: its name, base URL, process and log file."""

    name: str
    url: str
    process: subprocess.Popen
    log: Path
    ready_paths: Sequence[str] = ("/readyz", "/healthz")
    _stopped: bool = field(default=False, repr=False)

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Poll `/readyz` (or `/healthz` where a service has no readiness route) until 200."""
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise ServiceFailed(
                    f"{self.name} exited with code {self.process.returncode} before it was "
                    f"ready; its log ({self.log}):\n{self.log_tail()}"
                )
            if self._answers_ready():
                return
            if time.monotonic() > deadline:
                raise ServiceFailed(
                    f"{self.name} at {self.url} not ready after {timeout:.0f}s; "
                    f"its log ({self.log}):\n{self.log_tail()}"
                )
            time.sleep(0.2)

    def _answers_ready(self) -> bool:
        for path in self.ready_paths:
            try:
                status = httpx.get(f"{self.url}{path}", timeout=2).status_code
            except httpx.TransportError:
                return False
            if status == 200:
                return True
            if status != 404:  # the route exists and says "not yet"
                return False
        return False

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM, wait up to `grace` seconds, then SIGKILL; the whole process group."""
        if self._stopped:
            return
        self._stopped = True
        if self.process.poll() is not None:
            return
        _signal_group(self.process, signal.SIGTERM)
        try:
            self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            _signal_group(self.process, signal.SIGKILL)
            self.process.wait(timeout=grace)


def _signal_group(process: subprocess.Popen, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signum)


def start_service(
    name: str,
    args: Sequence[str],
    *,
    port: int,
    env: Mapping[str, str],
    log: Path,
    cwd: Path | None = None,
) -> ServiceProcess:
    """`python -m shared.apps.cli ARGS` as a child in its own session, output to `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "shared.apps.cli", *args],
            cwd=cwd,
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return ServiceProcess(name=name, url=f"http://127.0.0.1:{port}", process=process, log=log)


def start_registry(
    *,
    database_url: str,
    grants: list[dict[str, str]],
    log: Path,
    cwd: Path | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> ServiceProcess:
    """`intraskill registry serve` on a free loopback port (migrates the database first)."""
    port = free_port()
    env = {
        **(extra_env or {}),
        "DATABASE_URL": database_url,
        "REGISTRY_TOKENS": json.dumps(grants),
    }
    # A local run migrates and serves as one role (the owner): allowed, with a warning.
    args = ["registry", "serve", "--host", "127.0.0.1", "--port", str(port), "--allow-owner"]
    return start_service("registry", args, port=port, env=env, log=log, cwd=cwd)
