"""Gate data in the folder layout of the reference gates: `slots.json` + `observations.jsonl`.

`slots.json` = {"round", "mask_seed", "K", "columns": [{intervention_id, kind, logical_chunk_id,
operation, order}]}; `observations.jsonl` = one {"task_id", "mask", "masked", "bare"} per task,
masks in column order. `write_gate_folder` writes the same layout (there is no CLI export
command; `intraskill gate refit FOLDER` reads one).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from services.evaluator.design import (
    DEFAULT_BUDGET,
    DEFAULT_MASK_SEED,
    DEFAULT_SPLIT,
    GateDesign,
    design_from_columns,
)
from services.evaluator.fit import PairedObservation

SLOTS_FILE = "slots.json"
OBSERVATIONS_FILE = "observations.jsonl"
_OPERATION = {"current": "", "add": "ADD", "rewrite": "REWRITE", "draft": ""}


class GateFolderError(ValueError):
    """The folder is not in the gate layout (missing file, malformed line, ...)."""


@dataclass(frozen=True)
class GateData:
    """A gate's design and its paired observations: everything a refit needs."""

    design: GateDesign
    observations: tuple[PairedObservation, ...]
    round: int | None = None


def read_gate_folder(folder: str | Path, *, split: str = DEFAULT_SPLIT) -> GateData:
    """Load a gate from `folder`, checking masks against the columns."""
    folder = Path(folder)
    slots_path, observations_path = folder / SLOTS_FILE, folder / OBSERVATIONS_FILE
    for path in (slots_path, observations_path):
        if not path.is_file():
            raise GateFolderError(f"{folder}: missing {path.name}")
    try:
        layout = json.loads(slots_path.read_text(encoding="utf-8"))
        columns = layout["columns"]
    except (json.JSONDecodeError, KeyError, TypeError) as error:
        raise GateFolderError(f"{slots_path}: not a slots file ({error})") from None
    design = design_from_columns(
        columns,
        mask_seed=int(layout.get("mask_seed", DEFAULT_MASK_SEED)),
        budget=int(layout.get("K", DEFAULT_BUDGET)),
        split=str(layout.get("split", split)),
        kind=layout.get("gate_kind", "online"),
    )
    observations = []
    with observations_path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                observation = PairedObservation(
                    task_id=str(row["task_id"]),
                    mask=tuple(int(value) for value in row["mask"]),
                    masked={key: float(value) for key, value in row["masked"].items()},
                    bare={key: float(value) for key, value in row["bare"].items()},
                    sample=int(row.get("sample", 0)),
                )
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
                raise GateFolderError(
                    f"{observations_path}:{number}: bad observation ({error})"
                ) from None
            if len(observation.mask) != len(design.columns):
                raise GateFolderError(
                    f"{observations_path}:{number}: mask has {len(observation.mask)} entries "
                    f"for {len(design.columns)} columns"
                )
            observations.append(observation)
    round_number = layout.get("round")
    return GateData(
        design, tuple(observations), None if round_number is None else int(round_number)
    )


def write_gate_folder(data: GateData, folder: str | Path) -> Path:
    """Write `data` in the gate layout (creates the folder); returns the folder."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    layout = {
        "round": data.round,
        "mask_seed": data.design.mask_seed,
        "K": data.design.budget,
        "split": data.design.split,
        "gate_kind": data.design.kind,
        "columns": [
            {
                "intervention_id": version.intervention_id,
                "kind": version.kind,
                "logical_chunk_id": version.logical_id,
                "operation": _OPERATION[version.kind],
                "order": version.order,
            }
            for version in data.design.columns
        ],
    }
    (folder / SLOTS_FILE).write_text(json.dumps(layout, indent=1) + "\n", encoding="utf-8")
    with (folder / OBSERVATIONS_FILE).open("w", encoding="utf-8") as handle:
        for observation in data.observations:
            row = {
                "task_id": observation.task_id,
                "sample": observation.sample,
                "mask": list(observation.mask),
                "masked": dict(observation.masked),
                "bare": dict(observation.bare),
            }
            handle.write(json.dumps(row) + "\n")
    return folder
