"""Live services for the analyst's end-to-end tests: the evaluator and the analyst as real
subprocesses on loopback ports (the registry comes from the evaluator tests' fixture)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def service(command: list[str], env: dict[str, str], log: Path, *, timeout: float = 180):
    """`intraskill <command> --port P` until /healthz answers; yields its base URL."""
    port = free_port()
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "shared.cli", *command, "--port", str(port)],
            cwd=REPO,
            env={**os.environ, "OMP_NUM_THREADS": "1", **env},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{command[0]} did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.3)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()


def wait_job(http: httpx.Client, location: str, timeout: float = 1800) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = http.get(location).json()
        if job["status"] in ("succeeded", "failed"):
            return job
        if time.monotonic() > deadline:
            raise TimeoutError(f"{location} still {job['status']}")
        time.sleep(0.5)
