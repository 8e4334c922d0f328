"""`intraskill agent serve` as the vLLM tests start it: a subprocess in its own session whose
`base_url: ...` line says the server is healthy, stopped (with the server it launched) on exit."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# One KV-cache GiB and no thread pinning: two shared cores, other work beside the server.
SERVER_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),  # GiB
    "VLLM_CPU_OMP_THREADS_BIND": os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "0"),
    "OMP_NUM_THREADS": "1",
}


def read_base_url(process: subprocess.Popen, timeout_s: float) -> str:
    """The `base_url: ...` line `intraskill agent serve` prints once the server is healthy."""
    deadline = time.monotonic() + timeout_s
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if line.startswith("base_url: "):
            return line.removeprefix("base_url: ").strip()
        if not line and process.poll() is not None:
            raise RuntimeError(f"intraskill agent serve exited with {process.returncode}")
    raise TimeoutError("no base URL from intraskill agent serve")


@contextmanager
def agent_serve(args: list[str], *, timeout_s: float) -> Iterator[str]:
    """`intraskill agent serve ARGS` (run by this interpreter); yields its OpenAI base URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "shared.apps.cli", "agent", "serve", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **SERVER_ENV},
        start_new_session=True,
    )
    try:
        yield read_base_url(process, timeout_s)
    finally:
        process.terminate()  # the launcher stops the server it started
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
