"""Services as real child processes on loopback: start, wait until ready, stop every one.

`LoopbackStack` is a run folder's registry, evaluator and analyst (the trainer's local stack and
the demo's services); `start_service` and `start_registry` start one (the tests' live servers).
Children start in their own session, so a Ctrl-C at the terminal reaches only their parent,
which then stops them in order (SIGTERM, then SIGKILL after a grace period) instead of leaving
them half-dead. Tokens (one per registry role) are minted once per run folder and kept there
(mode 0600); every service of a stack admits the same grants, as in deploy/.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROLES = ("operator", "trainer", "evaluator", "analyst", "reader")
# The rollout backend the evaluator and the analyst run for each policy a run trains.
POLICY_BACKENDS = {"model": "transformers", "procedural": "procedural", "simulated": "simulated"}
READY_TIMEOUT_S = 300.0  # a service's start imports torch and statsmodels: minutes when loaded


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


def run_tokens(run_dir: Path, prefix: str = "demo") -> tuple[dict[str, str], list[dict[str, str]]]:
    """A local run folder's tokens and grants, minted on first use and kept there (mode 0600),
    so a resumed run, and a console pointed at the folder, meet the same registry grants. A
    file without grants (the trainer's older layout) is minted anew: services get their grants
    at each start, so no stored data depends on a token."""
    path = run_dir / "tokens.json"
    if path.exists():
        saved = json.loads(path.read_text())
        if "grants" in saved:
            return saved["tokens"], saved["grants"]
    run_dir.mkdir(parents=True, exist_ok=True)
    tokens, grants = mint_tokens(prefix)
    path.write_text(json.dumps({"tokens": tokens, "grants": grants}))
    path.chmod(0o600)
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


def _die_with_parent() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def start_service(
    name: str,
    args: Sequence[str],
    *,
    port: int,
    env: Mapping[str, str],
    log: Path,
    cwd: Path | None = None,
    die_with_parent: bool = False,
    module: str = "shared.apps.cli",
) -> ServiceProcess:
    """`python -m MODULE ARGS` (by default `intraskill ARGS`) as a child in its own session,
    output to `log`. With `die_with_parent`, the kernel ends it when its parent dies (a
    `kill -9` leaves no orphan holding a port or a SQLite file)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            cwd=cwd,
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent if die_with_parent else None,
        )
    return ServiceProcess(name=name, url=f"http://127.0.0.1:{port}", process=process, log=log)


def start_registry(
    *,
    database_url: str,
    grants: list[dict[str, str]],
    log: Path,
    cwd: Path | None = None,
    extra_env: Mapping[str, str] | None = None,
    die_with_parent: bool = False,
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
    return start_service(
        "registry", args, port=port, env=env, log=log, cwd=cwd, die_with_parent=die_with_parent
    )


@dataclass
class LoopbackStack:
    """A run folder's registry, evaluator and analyst on loopback: one grant list for all, each
    ready (its /readyz answers) before the next starts, stopped in reverse order.

    `folder` keeps the tokens, the embedded SQLite registry and the evaluator's and analyst's
    data; `env` goes to every child (the demo marks its children with it)."""

    folder: Path
    logs: Path
    prefix: str = "local"
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    die_with_parent: bool = False
    on_start: Callable[[str], object] | None = None
    started: list[ServiceProcess] = field(default_factory=list)

    def tokens(self) -> dict[str, str]:
        """One bearer token per role, minted on first use and kept in the folder."""
        return run_tokens(self.folder, self.prefix)[0]

    def grants(self) -> list[dict[str, str]]:
        """The grants (sha256 only) of `tokens()`, which every service of the stack admits."""
        return run_tokens(self.folder, self.prefix)[1]

    def start_registry(self, database_url: str | None = None) -> ServiceProcess:
        """The registry on `database_url`, or on an embedded SQLite file in the folder."""
        database = database_url or f"sqlite:///{(self.folder / 'registry.sqlite').resolve()}"
        service = start_registry(
            database_url=database,
            grants=self.grants(),
            log=self.logs / "registry.log",
            cwd=self.cwd,
            extra_env=self.env,
            die_with_parent=self.die_with_parent,
        )
        return self._ready(service)

    def start_evaluator(self, registry_url: str, settings: Mapping[str, str]) -> ServiceProcess:
        """`intraskill gate serve` on the registry, its jobs in the folder; `settings` are
        EVALUATOR_* variables."""
        env = {
            "EVALUATOR_REGISTRY_URL": registry_url,
            "EVALUATOR_REGISTRY_TOKEN": self.tokens()["evaluator"],
            "EVALUATOR_TOKENS": json.dumps(self.grants()),
            "EVALUATOR_JOBS_DIR": str((self.folder / "evaluator").resolve()),
            **settings,
        }
        return self._serve("evaluator", ["gate", "serve"], env)

    def start_analyst(
        self, registry_url: str, evaluator_url: str, settings: Mapping[str, str]
    ) -> ServiceProcess:
        """`intraskill analyst serve` on the registry and the evaluator (its own token to both),
        its data in the folder; `settings` are ANALYST_* variables."""
        env = {
            "ANALYST_REGISTRY_URL": registry_url,
            "ANALYST_REGISTRY_TOKEN": self.tokens()["analyst"],
            "ANALYST_EVALUATOR_URL": evaluator_url,
            "ANALYST_EVALUATOR_TOKEN": self.tokens()["analyst"],
            "ANALYST_TOKENS": json.dumps(self.grants()),
            "ANALYST_DATA_DIR": str((self.folder / "analyst").resolve()),
            **settings,
        }
        return self._serve("analyst", ["analyst", "serve"], env)

    def _serve(self, name: str, command: list[str], env: Mapping[str, str]) -> ServiceProcess:
        port = free_port()
        service = start_service(
            name,
            [*command, "--host", "127.0.0.1", "--port", str(port)],
            port=port,
            env={**self.env, **env},
            log=self.logs / f"{name}.log",
            cwd=self.cwd,
            die_with_parent=self.die_with_parent,
        )
        return self._ready(service)

    def _ready(self, service: ServiceProcess) -> ServiceProcess:
        self.started.append(service)
        if self.on_start is not None:
            self.on_start(service.name)
        service.wait_ready(timeout=READY_TIMEOUT_S)
        return service

    def urls(self) -> dict[str, str]:
        return {service.name: service.url for service in self.started}

    def stop(self) -> None:
        """Stop in reverse order of start: clients of the registry first, the registry last."""
        for service in reversed(self.started):
            service.stop()
        self.started.clear()
