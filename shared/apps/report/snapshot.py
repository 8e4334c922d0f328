"""A run's registry contents, read through the typed client and saved as `registry.json`.

The report works from this file alone, so a run folder stays readable after its registry is
gone; `intraskill report RUN_DIR --registry URL` refreshes it first.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from shared.contracts.registry_api.client import RegistryClient

SNAPSHOT_FILE = "registry.json"


def take_snapshot(client: RegistryClient) -> dict[str, Any]:
    """Banks with entries, gate runs with decisions, candidates, cards and evidence (slim)."""
    banks = []
    offset: int | None = 0
    while offset is not None:
        page = client.list_banks(limit=500, offset=offset)
        for summary in page.items:
            document = client.get_bank(summary.id)
            banks.append(
                {
                    **summary.model_dump(mode="json"),
                    "entries": [e.model_dump(mode="json") for e in document.entries],
                }
            )
        offset = page.next_offset
    gates = []
    titles: dict[int, str] = {}  # chunk version id -> title, so figures name chunks readably
    for run in client.list_gate_runs():
        decision = None
        if run.decision_id is not None:
            decision = client.get_gate_decision(run.id).model_dump(mode="json")
            for row in decision["rows"]:
                version_id = row["chunk_version_id"]
                if version_id not in titles:
                    titles[version_id] = client.get_chunk_version_by_id(version_id).content.title
                row["title"] = titles[version_id]
        gates.append({**run.model_dump(mode="json"), "decision": decision})
    aliases = {}
    for alias in client.list_aliases():
        aliases[alias.name] = [e.model_dump(mode="json") for e in client.alias_history(alias.name)]
    return {
        "taken_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "banks": banks,
        "gates": gates,
        "aliases": aliases,
        "candidates": [
            {k: c[k] for k in ("id", "round", "operation", "status", "chunk_id", "version")}
            for c in (c.model_dump(mode="json") for c in client.list_candidates())
        ],
        "cards": [
            {
                "id": c.id,
                "round": c.round,
                "outcome": c.outcome.value,
                "eligible": c.eligible,
                "verification": (c.extras or {}).get("verification"),
            }  # paired counts, k, seeds
            for c in client.list_cards()
        ],
        "evidence": [
            {"id": e.id, "round": e.round, "step": e.step, "retry": e.retry_outcome.value}
            for e in client.list_evidence()
        ],
    }


def save_snapshot(client: RegistryClient, run_dir: Path) -> Path:
    path = run_dir / SNAPSHOT_FILE
    path.write_text(json.dumps(take_snapshot(client), ensure_ascii=False, indent=1))
    return path


def load_snapshot(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / SNAPSHOT_FILE
    return json.loads(path.read_text()) if path.exists() else None
