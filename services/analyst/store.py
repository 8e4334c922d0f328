"""All-wrong groups and round funnels, kept as JSON files under the data folder.

A group's id is derived from its idempotency key (run, round, step, group index), so a resent
group finds its stored twin: the same body is a replay, a different body a conflict.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from shared.analyst_api.schemas import AllWrongGroupPublic, AllWrongGroupSubmit, FunnelCounts
from shared.hashing import content_hash


class GroupConflict(ValueError):
    """The key is taken by a group with another body."""


class GroupStore:
    def __init__(self, root: Path) -> None:
        self.folder = Path(root) / "groups"
        self.funnels = Path(root) / "funnels"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.funnels.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    @staticmethod
    def group_id(group: AllWrongGroupSubmit) -> str:
        return "awg-" + content_hash(list(group.key()))[:20]

    def _path(self, group_id: str) -> Path:
        return self.folder / f"{group_id}.json"

    def submit(self, group: AllWrongGroupSubmit, created_at: str) -> AllWrongGroupPublic:
        """Store a group, or return the stored one (replayed) when the same body comes again."""
        group_id = self.group_id(group)
        with self._lock:
            stored = self.get(group_id)
            if stored is not None:
                if stored.request != group:
                    raise GroupConflict(
                        f"group {group.key()} was submitted before with another body"
                    )
                return stored.model_copy(update={"replayed": True})
            record = AllWrongGroupPublic(
                id=group_id, request=group, status="pending", created_at=created_at
            )
            self._save(record)
            return record

    def _save(self, record: AllWrongGroupPublic) -> None:
        temporary = self._path(record.id).with_suffix(".tmp")
        temporary.write_text(record.model_dump_json(exclude={"replayed"}), encoding="utf-8")
        temporary.replace(self._path(record.id))

    def get(self, group_id: str) -> AllWrongGroupPublic | None:
        path = self._path(group_id)
        if not path.exists():
            return None
        return AllWrongGroupPublic.model_validate_json(path.read_text(encoding="utf-8"))

    def update(self, group_id: str, **changes: Any) -> AllWrongGroupPublic:
        with self._lock:
            record = self.get(group_id)
            if record is None:
                raise KeyError(group_id)
            record = record.model_copy(update=changes)
            self._save(record)
            return record

    def list(
        self, *, run_id: str | None = None, round: int | None = None, status: str | None = None
    ) -> list[AllWrongGroupPublic]:
        records = [
            AllWrongGroupPublic.model_validate_json(path.read_text(encoding="utf-8"))
            for path in sorted(self.folder.glob("*.json"))
        ]
        return sorted(
            (
                r
                for r in records
                if (run_id is None or r.request.run_id == run_id)
                and (round is None or r.request.round == round)
                and (status is None or r.status == status)
            ),
            key=lambda r: (r.request.round, r.request.step, r.request.group_index),
        )

    def _funnel_path(self, run_id: str, round: int) -> Path:
        return self.funnels / f"{run_id}-r{round}.json"

    def save_funnel(self, funnel: FunnelCounts) -> None:
        path = self._funnel_path(funnel.run_id, funnel.round)
        path.write_text(funnel.model_dump_json(), encoding="utf-8")

    def funnel(self, run_id: str, round: int) -> FunnelCounts:
        """The round's funnel: compiled counts once a compile ran, else what is known so far."""
        path = self._funnel_path(run_id, round)
        if path.exists():
            return FunnelCounts.model_validate(json.loads(path.read_text(encoding="utf-8")))
        groups = self.list(run_id=run_id, round=round)
        return FunnelCounts(run_id=run_id, round=round, all_wrong_groups=len(groups))
