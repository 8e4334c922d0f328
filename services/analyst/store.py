"""All-wrong groups and round funnels, kept as JSON files under the data folder.

A group's id is derived from its idempotency key (run, round, step, group index), so a resent
group finds its stored twin: the same body is a replay, a different body a conflict.

Listings read an index held in memory (each group's run, round, step, index and status; built
once at start), then parse only the page asked for. A funnel file is named by a hash of its
(run, round), never by text a request sent: a lookup can name no other file.

Each group file also names the caller that wrote it (beside the public record, never shown),
so that one trainer's writes are capped (`max_per_caller` new groups; a replay is not a write):
a runaway or hostile trainer fills its own quota, not the analyst's disk.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

from shared.contracts.analyst_api.schemas import (
    AllWrongGroupPublic,
    AllWrongGroupSubmit,
    FunnelCounts,
)
from shared.contracts.hashing import content_hash
from shared.kit.files import write_json_atomic


class GroupConflict(ValueError):
    """The key is taken by a group with another body."""


class GroupQuotaFull(RuntimeError):
    """The caller has written `max_per_caller` groups already (answered 429)."""


CALLER = "submitted_by"  # the writer's principal, kept in the file beside the public record


class Indexed(NamedTuple):
    """What a listing filters and sorts on, per group."""

    run_id: str
    round: int
    step: int
    group_index: int
    status: str
    caller: str | None

    @classmethod
    def of(cls, record: AllWrongGroupPublic, caller: str | None) -> Indexed:
        request = record.request
        return cls(
            request.run_id, request.round, request.step, request.group_index, record.status, caller
        )


def _read(path: Path) -> tuple[AllWrongGroupPublic, str | None]:
    """A stored group and the caller that wrote it (None for a file from before the cap)."""
    document = json.loads(path.read_bytes())
    caller = document.pop(CALLER, None)
    return AllWrongGroupPublic.model_validate(document), caller


class GroupStore:
    def __init__(self, root: Path, *, max_per_caller: int | None = None) -> None:
        self.max_per_caller = max_per_caller
        self.folder = Path(root) / "groups"
        self.funnels = Path(root) / "funnels"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.funnels.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._index = {path.stem: Indexed.of(*_read(path)) for path in self.folder.glob("*.json")}
        self._written = Counter(entry.caller for entry in self._index.values())

    @staticmethod
    def group_id(group: AllWrongGroupSubmit) -> str:
        return "awg-" + content_hash(list(group.key()))[:20]

    def _path(self, group_id: str) -> Path:
        return self.folder / f"{group_id}.json"

    def submit(
        self, group: AllWrongGroupSubmit, created_at: str, caller: str | None = None
    ) -> AllWrongGroupPublic:
        """Store a group, or return the stored one (replayed) when the same body comes again;
        GroupQuotaFull when `caller` has written its `max_per_caller` groups."""
        group_id = self.group_id(group)
        with self._lock:
            stored = self.get(group_id)
            if stored is not None:
                if stored.request != group:
                    raise GroupConflict(
                        f"group {group.key()} was submitted before with another body"
                    )
                return stored.model_copy(update={"replayed": True})
            if self.max_per_caller is not None and self._written[caller] >= self.max_per_caller:
                raise GroupQuotaFull(
                    f"{caller!r} has written {self.max_per_caller} groups, the most one caller "
                    "may (ANALYST_MAX_GROUPS_PER_CALLER)"
                )
            record = AllWrongGroupPublic(
                id=group_id, request=group, status="pending", created_at=created_at
            )
            self._save(record, caller)
            self._written[caller] += 1
            return record

    def _save(self, record: AllWrongGroupPublic, caller: str | None) -> None:
        document = record.model_dump(mode="json", exclude={"replayed"})
        if caller is not None:
            document[CALLER] = caller
        write_json_atomic(self._path(record.id), document, indent=None)
        self._index[record.id] = Indexed.of(record, caller)

    def get(self, group_id: str) -> AllWrongGroupPublic | None:
        path = self._path(group_id)
        if not path.exists():
            return None
        return _read(path)[0]

    def update(self, group_id: str, **changes: Any) -> AllWrongGroupPublic:
        with self._lock:
            record = self.get(group_id)
            if record is None:
                raise KeyError(group_id)
            record = record.model_copy(update=changes)
            self._save(record, self._index[group_id].caller)
            return record

    def list(
        self,
        *,
        run_id: str | None = None,
        round: int | None = None,
        status: str | None = None,
        offset: int = 0,
        limit: int | None = None,
    ) -> list[AllWrongGroupPublic]:
        """The groups that match, by (round, step, group index); `limit` of them from `offset`
        (all when None)."""
        page = self.ids(run_id=run_id, round=round, status=status)[offset:]
        if limit is not None:
            page = page[:limit]
        return [record for group_id in page if (record := self.get(group_id)) is not None]

    def ids(
        self, *, run_id: str | None = None, round: int | None = None, status: str | None = None
    ) -> list[str]:
        """The matching groups' ids, in listing order (from the index alone)."""
        with self._lock:
            entries = list(self._index.items())
        matching = [
            (entry.round, entry.step, entry.group_index, group_id)
            for group_id, entry in entries
            if (run_id is None or entry.run_id == run_id)
            and (round is None or entry.round == round)
            and (status is None or entry.status == status)
        ]
        return [group_id for *_, group_id in sorted(matching)]

    def _funnel_path(self, run_id: str, round: int) -> Path:
        return self.funnels / f"funnel-{content_hash([run_id, round])[:24]}.json"

    def save_funnel(self, funnel: FunnelCounts) -> None:
        path = self._funnel_path(funnel.run_id, funnel.round)
        path.write_text(funnel.model_dump_json(), encoding="utf-8")

    def funnel(self, run_id: str, round: int) -> FunnelCounts:
        """The round's funnel: compiled counts once a compile ran, else what is known so far."""
        path = self._funnel_path(run_id, round)
        if path.exists():
            return FunnelCounts.model_validate(json.loads(path.read_text(encoding="utf-8")))
        groups = self.ids(run_id=run_id, round=round)
        return FunnelCounts(run_id=run_id, round=round, all_wrong_groups=len(groups))
