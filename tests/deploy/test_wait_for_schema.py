"""The registry's init container script: it passes only once the schema is at Alembic's head."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("alembic")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "deploy" / "k8s" / "base" / "scripts" / "wait_for_schema.py"


def wait(database: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--timeout", "0", "--interval", "0.1"],
        capture_output=True,
        text=True,
        env=env,
        cwd=database.parent,
        timeout=120,
    )


def test_waits_until_the_migrations_ran(tmp_path: Path) -> None:
    from services.registry.migrate import upgrade

    database = tmp_path / "registry.sqlite"
    before = wait(database)
    assert before.returncode == 1 and "has the migrations Job run?" in before.stderr
    upgrade(f"sqlite:///{database}")
    after = wait(database)
    assert after.returncode == 0, after.stderr
    assert "schema at head" in after.stdout
