"""A real `intraskill registry serve` subprocess on loopback, on SQLite or a scratch Postgres DB.

Started through the demo's own process helpers, so these tests also exercise how the demo
launches and stops the registry.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from shared.kit.loopback import mint_tokens, start_registry
from tests.live_servers import scratch_database


@dataclass
class LiveRegistry:
    url: str
    tokens: dict[str, str]
    database: str


@contextmanager
def live_registry(backend: str, folder: Path) -> Iterator[LiveRegistry]:
    tokens, grants = mint_tokens("optest")
    with scratch_database(backend, folder, prefix="operator_test") as database:
        service = start_registry(database_url=database, grants=grants, log=folder / "reg.log")
        try:
            service.wait_ready(timeout=90)
            yield LiveRegistry(url=service.url, tokens=tokens, database=database)
        finally:
            service.stop()
