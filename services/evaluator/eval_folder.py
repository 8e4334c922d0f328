"""An evaluation's folder: `plan.json` beside `records.jsonl`, from which its report is rebuilt."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from services.evaluator.eval_conditions import Condition
from services.evaluator.eval_report import evaluation_report
from services.evaluator.eval_run import PlannedEvaluation
from services.evaluator.gate_job import read_records

PLAN_FILE = "plan.json"


def write_plan(planned: PlannedEvaluation, folder: Path) -> None:
    """What a report needs besides the records: conditions, tasks, comparisons, bootstrap."""
    plan = {
        "conditions": [c.as_dict() for c in planned.conditions],
        "task_ids": list(planned.task_ids),
        "split": planned.split,
        "comparisons": None
        if planned.comparisons is None
        else [list(p) for p in planned.comparisons],
        "resamples": planned.resamples,
        "seed": planned.seed,
    }
    (Path(folder) / PLAN_FILE).write_text(json.dumps(plan, indent=1))


def report_from_folder(
    folder: str | Path, *, resamples: int | None = None, seed: int | None = None
) -> dict[str, Any]:
    """Recompute an evaluation's report from its folder (plan.json + records.jsonl)."""
    folder = Path(folder)
    plan = json.loads((folder / PLAN_FILE).read_text())
    conditions = [Condition.from_dict(c) for c in plan["conditions"]]
    comparisons = plan.get("comparisons")
    return evaluation_report(
        read_records(folder / "records.jsonl"),
        conditions,
        plan["task_ids"],
        comparisons=None if comparisons is None else [tuple(p) for p in comparisons],
        resamples=resamples or plan["resamples"],
        seed=plan["seed"] if seed is None else seed,
    )
