"""A run folder read into plain tables: training metrics, funnel, bank lineage, gates, test."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.apps.report.snapshot import load_snapshot
from shared.runtime.noise_floor import comparison_label

# Where the trainer's per-step metrics may lie in a run folder: a trainer's own --out, or the
# demo's train/RUN_ID/ (the trainer names its run after that folder).
METRICS_FILES = ("metrics.jsonl", "train/metrics.jsonl", "train/*/metrics.jsonl")
EVALUATION_FILES = ("test/evaluation.json", "evaluation.json")
CONDITIONS = ("base/bare", "base/S0", "trained/bare", "trained/S_T")
ONE_SIDED_Z95 = 1.6448536269514722  # the standard normal's 95th percentile
FUNNEL_COLUMNS = ("all_wrong_groups", "failed_retries", "deficits", "cards", "verified",
                  "eligible", "candidates")  # fmt: skip


@dataclass
class RunData:
    run_dir: Path
    metrics: list[dict[str, Any]]
    summary: dict[str, Any] | None
    snapshot: dict[str, Any] | None
    evaluation: dict[str, Any] | None


def _first_existing(run_dir: Path, patterns: Iterable[str]) -> Path | None:
    return next((path for p in patterns for path in sorted(run_dir.glob(p))), None)


def flatten(record: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested metric dicts as one level, keys joined with '/' (`filter/dropped_technical`)."""
    flat: dict[str, Any] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}/"))
        else:
            flat[name] = value
    return flat


def read_metrics(path: Path | None) -> list[dict[str, Any]]:
    """Per-step lines; a torn last line (a run killed mid-write) is skipped, not fatal."""
    if path is None or not path.exists():
        return []
    lines = []
    for text in path.read_text().splitlines():
        try:
            lines.append(flatten(json.loads(text)))
        except json.JSONDecodeError:
            continue
    return lines


def load_run(run_dir: Path) -> RunData:
    if not run_dir.is_dir():
        raise FileNotFoundError(f"no run folder {run_dir}")
    summary_path = run_dir / "summary.json"
    evaluation_path = _first_existing(run_dir, EVALUATION_FILES)
    return RunData(
        run_dir=run_dir,
        metrics=read_metrics(_first_existing(run_dir, METRICS_FILES)),
        summary=json.loads(summary_path.read_text()) if summary_path.exists() else None,
        snapshot=load_snapshot(run_dir),
        evaluation=json.loads(evaluation_path.read_text()) if evaluation_path else None,
    )


def series(metrics: Sequence[Mapping[str, Any]], names: Sequence[str]) -> list[float] | None:
    """The first of `names` present in the metrics (full key or last path part), per step."""
    for name in names:
        values = [_lookup(line, name) for line in metrics]
        if any(v is not None for v in values):
            return [float("nan") if v is None else float(v) for v in values]
    return None


def _lookup(line: Mapping[str, Any], name: str) -> Any:
    if name in line:
        return line[name]
    for key, value in line.items():
        if key.rsplit("/", 1)[-1] == name and isinstance(value, int | float):
            return value
    return None


# ---------------------------------------------------------------- funnel


def funnel(run: RunData) -> dict[int, dict[str, int]]:
    """Per round: all-wrong groups, failed retries, deficits, cards, verified (the paired
    check passed), eligible, candidates.

    The demo's summary carries the analyst's own counts; otherwise they are counted from the
    registry snapshot's evidence, cards and candidates.
    """
    rounds: dict[int, dict[str, int]] = {}
    for entry in (run.summary or {}).get("rounds", []):
        counts = entry.get("funnel")
        if counts:
            rounds[int(entry["round"])] = {k: int(counts.get(k, 0)) for k in FUNNEL_COLUMNS}
    if rounds or run.snapshot is None:
        return rounds
    snap = run.snapshot
    for item in snap.get("evidence", []):
        row = rounds.setdefault(item["round"], dict.fromkeys(FUNNEL_COLUMNS, 0))
        row["all_wrong_groups"] += 1
        row["failed_retries"] += item["retry"] == "failure"
        row["deficits"] += item["retry"] == "success"
    for card in snap.get("cards", []):
        row = rounds.setdefault(card["round"], dict.fromkeys(FUNNEL_COLUMNS, 0))
        row["cards"] += 1
        row["verified"] += bool((card.get("verification") or {}).get("verified"))
        row["eligible"] += bool(card["eligible"])
    for candidate in snap.get("candidates", []):
        rounds.setdefault(candidate["round"], dict.fromkeys(FUNNEL_COLUMNS, 0))["candidates"] += 1
    return dict(sorted(rounds.items()))


def verification(run: RunData) -> list[dict[str, Any]]:
    """Per stage (the cold start, then each round): the paired check of the cards that
    proposed a repair: how many, how many verified, successes with and without the repair
    summed over them, and each verified card's counts."""
    summary = run.summary or {}
    stages = [("cold start", (summary.get("cold_start") or {}).get("verification"))]
    stages += [(f"round {r['round']}", r.get("verification")) for r in summary.get("rounds", [])]
    if not any(checked for _, checked in stages) and run.snapshot is not None:
        by_round: dict[int, list[dict[str, Any]]] = {}
        for card in run.snapshot.get("cards", []):
            if card.get("verification"):
                by_round.setdefault(card["round"], []).append(
                    {"card_id": card["id"], **card["verification"]}
                )
        stages = [(f"round {r}", checked) for r, checked in sorted(by_round.items())]
    rows = []
    for stage, checked in stages:
        if not checked:
            continue
        verified = [c for c in checked if c["verified"]]
        rows.append({
            "stage": stage,
            "checked": len(checked),
            "verified": len(verified),
            "with": sum(c["with"] for c in checked),
            "without": sum(c["without"] for c in checked),
            "verified_cards": ", ".join(
                f"#{c['card_id']} {c['with']} vs {c['without']} of {c['k']}" for c in verified
            ),
        })  # fmt: skip
    return rows


# ---------------------------------------------------------------- banks


def lineage(snapshot: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Adopted banks in order: each one `current` pointed at, else every frozen bank."""
    if not snapshot:
        return []
    by_id = {bank["id"]: bank for bank in snapshot.get("banks", [])}
    history = snapshot.get("aliases", {}).get("current", [])
    order: list[int] = []
    for event in history:
        if event["to_bank_id"] not in order:
            order.append(event["to_bank_id"])
    if not order:
        order = sorted(i for i, b in by_id.items() if b.get("status") != "draft")
    return [by_id[i] for i in order if i in by_id]


@dataclass
class ChunkTrack:
    """One logical chunk across the adopted banks: per bank its entry or None."""

    chunk_id: int
    slug: str
    title: str
    cells: list[dict[str, Any] | None]

    def change(self, index: int) -> str:
        """'added', 'rewritten', 'retired', 'kept' or '' (absent before and now)."""
        now = self.cells[index]
        before = self.cells[index - 1] if index > 0 else None
        if now is None:
            return "retired" if before is not None else ""
        if before is None:
            return "added"
        return "rewritten" if now["version"] != before["version"] else "kept"


def chunk_tracks(banks: Sequence[Mapping[str, Any]]) -> list[ChunkTrack]:
    tracks: dict[int, ChunkTrack] = {}
    for index, bank in enumerate(banks):
        for entry in bank["entries"]:
            track = tracks.setdefault(
                entry["chunk_id"],
                ChunkTrack(entry["chunk_id"], entry["slug"], "", [None] * len(banks)),
            )
            track.cells[index] = entry
            track.title = entry["content"]["title"]
    return list(tracks.values())


def lineage_counts(banks: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per adopted bank: size and how many chunks were added, rewritten, retired, kept."""
    tracks = chunk_tracks(banks)
    rows = []
    for index, bank in enumerate(banks):
        changes = [t.change(index) for t in tracks]
        rhos = [e["rho"] for e in bank["entries"]]
        rows.append(
            {
                "bank_id": bank["id"],
                "round": bank["round"],
                "size": len(bank["entries"]),
                **{c: changes.count(c) for c in ("added", "rewritten", "retired", "kept")},
                "rho_min": min(rhos) if rhos else None,
                "rho_max": max(rhos) if rhos else None,
            }
        )
    return rows


# ---------------------------------------------------------------- gates


def gates_with_decisions(snapshot: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    if not snapshot:
        return []
    return [g for g in snapshot.get("gates", []) if g.get("decision")]


def decision_rows(gate: Mapping[str, Any], component: str = "r_strict") -> list[dict[str, Any]]:
    """Per pool column: label, kind, status, coefficient, its HC3 95% interval and one-sided
    95% lower bound (beta - 1.645 SE, from the stored HC3 SE; None if absent)."""
    rows = []
    for row in gate["decision"]["rows"]:
        low, high = row.get("ci_low") or {}, row.get("ci_high") or {}
        beta, se = row["coefficients"].get(component), (row.get("hc3_se") or {}).get(component)
        rows.append(
            {
                "label": f"{row['slug']} v{row['version']}",
                "title": row.get("title"),
                "kind": row["kind"],
                "status": row["status"],
                "rank": row.get("rank"),
                "coefficient": row["coefficients"].get(component),
                "ci_low": low.get(component),
                "ci_high": high.get(component),
                "lower_bound": None if beta is None or se is None else beta - ONE_SIDED_Z95 * se,
            }
        )
    return rows


# ---------------------------------------------------------------- test


def test_rows(run: RunData) -> list[dict[str, Any]]:
    """Per condition: success and strict reward with the summary's interval, if any."""
    conditions = (run.evaluation or {}).get("conditions", {})
    summary_test = (run.summary or {}).get("test", {})
    rows = []
    for name in CONDITIONS:
        metrics = conditions.get(name, {}).get("metrics", {})
        from_summary = summary_test.get(name, {})
        success = metrics.get("r_success", from_summary.get("success"))
        if success is None:
            continue
        rows.append(
            {
                "condition": name,
                "success": success,
                "success_ci": from_summary.get("success_ci"),
                "r_strict": metrics.get("r_strict", from_summary.get("r_strict")),
                "steps": metrics.get("steps"),
            }
        )
    return rows


def test_differences(run: RunData) -> list[dict[str, Any]]:
    """Paired success differences a - b with their bootstrap interval, from the evaluator."""
    rows = []
    for comparison in (run.evaluation or {}).get("comparisons", []):
        diff = comparison["differences"]["r_success"]
        rows.append(
            {
                "a": comparison["a"],
                "b": comparison["b"],
                "label": comparison_label(comparison),
                "estimate": diff["estimate"],
                "low": diff["low"],
                "high": diff["high"],
                "flips": comparison.get("flips", {}),
            }
        )
    return rows
