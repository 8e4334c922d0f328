"""The services a run needs, started on loopback when no URL is given: real processes, not mocks.

* registry: `intraskill registry serve` on an embedded SQLite file in the run folder, with one
  token per role minted here (kept in the run folder, so a resumed run talks to the same data);
  the evaluator and the analyst admit the same grants, as in deploy/;
* evaluator: `intraskill gate serve`, its backend set to the run's policy (transformers for the
  model, or the `simulated` / `procedural` test doubles), jobs in the run folder;
* analyst: `intraskill analyst serve` (the real slow loop: retries, rules analyst, compiler),
  reaching the same registry and evaluator, its retries and live tests on the backend the
  compile request names, data in the run folder. (Tests that count the trainer's calls start
  a recording analyst TEST DOUBLE themselves and pass its URL.)

Children die with the trainer (PR_SET_PDEATHSIG), so a `kill -9` leaves no orphan holding a
port or the SQLite file; a resumed run starts them again on the same folders.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from shared.contracts.http_retry import wait_until_ready

ROLES = ("operator", "trainer", "evaluator", "analyst", "reader")
REPO = Path(__file__).resolve().parents[2]


class StackError(RuntimeError):
    """A local service did not start."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@dataclass
class LocalStack:
    """Processes started for one run; `close()` stops them."""

    folder: Path
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    urls: dict[str, str] = field(default_factory=dict)

    def tokens(self) -> dict[str, str]:
        """One bearer token per role, minted on first use and kept in the run folder."""
        path = self.folder / "tokens.json"
        if path.is_file():
            return json.loads(path.read_text())
        self.folder.mkdir(parents=True, exist_ok=True)
        tokens = {role: secrets.token_urlsafe(24) for role in ROLES}
        path.write_text(json.dumps(tokens))
        path.chmod(0o600)
        return tokens

    def _start(self, name: str, argv: list[str], env: dict[str, str], port: int) -> str:
        log = self.folder / f"{name}.log"
        with log.open("a") as out:
            process = subprocess.Popen(
                [sys.executable, *argv],
                cwd=REPO,
                env={**os.environ, **env},
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )
        self.processes[name] = process
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until_ready(url, process, timeout=180, log=log)
        except RuntimeError as error:
            self.close()
            raise StackError(f"local {name} did not start (log {log}): {error}") from None
        self.urls[name] = url
        return url

    def grants(self) -> str:
        """The JSON grants (sha256 only) of `tokens()`, which every local service admits."""
        tokens = self.tokens()
        return json.dumps(
            [
                {
                    "name": f"local-{role}",
                    "role": role,
                    "token_sha256": hashlib.sha256(tokens[role].encode()).hexdigest(),
                }
                for role in ROLES
            ]
        )

    def start_registry(self) -> str:
        port = free_port()
        env = {
            "DATABASE_URL": f"sqlite:///{(self.folder / 'registry.sqlite').resolve()}",
            "REGISTRY_TOKENS": self.grants(),
        }
        argv = ["-m", "shared.apps.cli", "registry", "serve", "--port", str(port)]
        return self._start("registry", argv, env, port)

    def start_evaluator(self, registry_url: str, settings: dict[str, str]) -> str:
        port = free_port()
        env = {
            "EVALUATOR_REGISTRY_URL": registry_url,
            "EVALUATOR_REGISTRY_TOKEN": self.tokens()["evaluator"],
            "EVALUATOR_TOKENS": self.grants(),
            "EVALUATOR_JOBS_DIR": str((self.folder / "evaluator").resolve()),
            **settings,
        }
        argv = ["-m", "shared.apps.cli", "gate", "serve", "--port", str(port)]
        return self._start("evaluator", argv, env, port)

    def start_analyst(self, registry_url: str, evaluator_url: str, settings: dict[str, str]) -> str:
        port = free_port()
        env = {
            "ANALYST_REGISTRY_URL": registry_url,
            "ANALYST_REGISTRY_TOKEN": self.tokens()["analyst"],
            "ANALYST_EVALUATOR_URL": evaluator_url,
            "ANALYST_EVALUATOR_TOKEN": self.tokens()["analyst"],
            "ANALYST_TOKENS": self.grants(),
            "ANALYST_DATA_DIR": str((self.folder / "analyst").resolve()),
            **settings,
        }
        argv = ["-m", "shared.apps.cli", "analyst", "serve", "--port", str(port)]
        return self._start("analyst", argv, env, port)

    def close(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        self.processes.clear()
