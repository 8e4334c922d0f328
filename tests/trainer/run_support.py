"""Helpers for tests that run `intraskill train run` as a real subprocess."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from shared.kit.loopback import free_port, start_service

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs"


def train_command(config: Path, out: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "shared.apps.cli",
        "train",
        "run",
        "--config",
        str(config),
        "--out",
        str(out),
        *extra,
    ]


# The trainer refuses to start without a token for a service it is given by URL; the stand-ins
# and the dead URLs these tests pass check none, so any token does.
STAND_IN_TOKENS = {
    "--evaluator-url": "TRAINER_EVALUATOR_TOKEN",
    "--analyst-url": "TRAINER_ANALYST_TOKEN",
}


def environment(*argv: str) -> dict[str, str]:
    """One BLAS thread, and a token for each service `argv` names by URL."""
    tokens = {name: "stand-in" for flag, name in STAND_IN_TOKENS.items() if flag in argv}
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", **tokens}


def run_train(config: Path, out: Path, *extra: str, timeout: float = 900, **env: str):
    return subprocess.run(
        train_command(config, out, *extra),
        cwd=REPO,
        env={**environment(*extra), **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@contextmanager
def analyst_standin(folder: Path) -> Iterator[str]:
    """The recording analyst TEST DOUBLE on loopback (state in `folder`); yields its URL."""
    port = free_port()
    service = start_service(
        "analyst-standin",
        ["--port", str(port), "--folder", str(folder)],
        port=port,
        env=environment(),
        log=folder.with_name(f"{folder.name}.log"),
        cwd=REPO,
        module="tests.trainer.analyst_standin",
    )
    try:
        service.wait_ready(timeout=60)
        yield service.url
    finally:
        service.stop()


def metrics(out: Path) -> list[dict]:
    path = out / "metrics.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def registry_rows(out: Path, table: str) -> list[sqlite3.Row]:
    """Rows of the local registry's SQLite file (read after the run stopped its registry)."""
    with sqlite3.connect(out / "services" / "registry.sqlite") as connection:
        connection.row_factory = sqlite3.Row
        return list(connection.execute(f"SELECT * FROM {table}"))
