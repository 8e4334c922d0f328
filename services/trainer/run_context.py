"""What every phase of a run shares: the config, the run folder's two files, the service clients.

`run.json` (the record: config, services, one entry per round) and `state.json` (where the run
stands: `RunState`) are rewritten atomically after every phase, so a restart reads a consistent
pair (see `orchestrator.py` on resume).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console

from services.trainer.config import TrainerConfig
from shared.contracts.hashing import content_hash
from shared.kit.files import write_json_atomic

STATE_FILE, RUN_FILE, METRICS_FILE = "state.json", "run.json", "metrics.jsonl"
# state.json's schema: 1 is the unversioned file written before `RunState` (the same fields,
# read as they are); a version this trainer does not know is refused, never guessed at.
STATE_SCHEMA_VERSION = 2
Phase = Literal["train", "compile", "gate"]  # a round's phases, in order


class RunError(RuntimeError):
    """The run stopped cleanly; the message says why and what to restart."""


def unavailable(service: str, url: str, error: Exception, restart: str) -> RunError:
    return RunError(
        f"the {service} at {url} is unreachable after retries ({error}). Restart it "
        f"({restart}) and rerun the same command: the run resumes from its last checkpoint."
    )


def run_id_for(out: Path) -> str:
    """A registry-safe id for the run: its folder name and a digest of its absolute path (two
    folders of one name never share checkpoint ids or idempotency keys)."""
    folder = out.resolve()
    slug = re.sub(r"[^a-z0-9._-]+", "-", folder.name.lower()).strip("-._") or "run"
    return f"{slug[:32]}-{content_hash(str(folder))[:6]}"


def write_json(path: Path, data: Any) -> None:
    write_json_atomic(path, data)


def read_json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.is_file() else None


class RunState(BaseModel):
    """Where the run stands (`state.json`): the round and its phase, the step, the cursors a
    resume continues from, the bank S_t and the latest checkpoint."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    schema_version: Literal[2] = STATE_SCHEMA_VERSION
    round: int = Field(0, ge=0)
    phase: Phase = "train"
    step: int = Field(0, ge=0)  # rollout steps done
    next_group_index: int = Field(0, ge=0)  # the next rollout group's index (tasks, seeds)
    metrics_lines: int = Field(0, ge=0)  # metrics.jsonl lines up to the last saved state
    bank_id: int  # S_t
    checkpoint_dir: str | None = None  # the latest checkpoint's folder (None: the base model)
    checkpoint_id: str | None = None  # ... and its registry id

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunState:
        """The state a `state.json` holds; RunError for a schema version this trainer does
        not know (a newer trainer's file)."""
        version = data.get("schema_version", 1)
        if version not in (1, STATE_SCHEMA_VERSION):
            raise RunError(
                f"state.json has schema version {version!r}; this trainer reads versions 1 to "
                f"{STATE_SCHEMA_VERSION}. Resume with the trainer that wrote it, or use a new "
                "--out folder."
            )
        return cls.model_validate({**data, "schema_version": STATE_SCHEMA_VERSION})


class RoundRecord(BaseModel):
    """One round's entry in `run.json`: what each phase did, grouped by the module that
    writes it. A key is absent until its phase writes it (the file keeps that shape); keys an
    earlier or later trainer wrote are kept as they are."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    round: int = Field(ge=0)
    # round_loop: S_t as pinned, and the curriculum built from it
    bank_id: int | None = None
    bank_hash: str | None = None
    curriculum_state_id: str | None = None
    q: float | None = None
    rho: dict[str, float] | None = None
    # checkpoints
    checkpoint_id: str | None = None
    checkpoint_uri: str | None = None
    step: int | None = None
    # evidence (or, without the skill loop, only the count)
    all_wrong_groups: int | None = None
    evidence_ids: list[int] | None = None
    evidence_uri: str | None = None
    # candidate_compile
    compile_job_id: str | None = None
    candidate_ids: list[int] = Field(default_factory=list)
    funnel: dict[str, Any] | None = None
    verification: list[dict[str, Any]] | None = None
    # gate_round
    gate_job_id: str | None = None
    val_task_ids: list[str] | None = None
    mask_seed: int | None = None
    gate_status: str | None = None
    gate_error: str | None = None
    gate_run_id: int | None = None
    gate_decision_id: int | None = None
    next_bank_id: int | None = None
    adopted: bool | None = None
    admitted_untested: list[int] | None = None

    def update(self, **fields: Any) -> None:
        """Set these fields (each validated); a name the record does not declare is an error,
        not a new key."""
        unknown = set(fields) - set(type(self).model_fields)
        if unknown:
            raise AttributeError(f"RoundRecord has no field {', '.join(sorted(unknown))}")
        for name, value in fields.items():
            setattr(self, name, value)


class RunRecord:
    """`run.json`: the run's id, config, services and one `RoundRecord` per round."""

    def __init__(self, out: Path, config: TrainerConfig) -> None:
        self.path = out / RUN_FILE
        self.data: dict[str, Any] = read_json(self.path) or {
            "run_id": run_id_for(out),
            "config": json.loads(json.dumps(config.as_dict())),  # tuples as JSON lists
            "rounds": [],
        }
        self.rounds = [RoundRecord.model_validate(entry) for entry in self.data["rounds"]]

    @property
    def run_id(self) -> str:
        return self.data["run_id"]  # fixed at the run's first start

    def round(self, round_index: int) -> RoundRecord:
        while len(self.rounds) <= round_index:
            self.rounds.append(RoundRecord(round=len(self.rounds)))
        return self.rounds[round_index]

    def service_url(self, name: str) -> str:
        return self.data["services"][name]

    def save(self) -> None:
        # only the keys a phase wrote: a round's entry grows as its phases run
        self.data["rounds"] = [
            entry.model_dump(mode="json", exclude_unset=True) for entry in self.rounds
        ]
        write_json(self.path, self.data)


@dataclass
class RunContext:
    """The run's shared parts, handed to each phase; `clients` is set once services start."""

    config: TrainerConfig
    out: Path
    record: RunRecord
    console: Console
    clients: Any = None  # service_lifecycle.ServiceClients

    @property
    def run_id(self) -> str:
        return self.record.run_id

    def save_state(self, state: RunState) -> None:
        write_json(self.out / STATE_FILE, state.model_dump(mode="json"))

    def load_state(self) -> RunState | None:
        data = read_json(self.out / STATE_FILE)
        return None if data is None else RunState.from_json(data)

    def heartbeat(self) -> None:
        """Touch the run folder: a liveness probe ("the folder changed in the last 90 min")
        then sees a run that trains or waits on a long gate as alive."""
        os.utime(self.out)

    def registry_unavailable(self, error: Exception) -> RunError:
        url = self.record.service_url("registry")
        return unavailable("registry", url, error, "intraskill registry serve")
