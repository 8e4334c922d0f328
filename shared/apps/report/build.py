"""Assemble the report: read the run, draw the figures, lay out the sections."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from shared.apps.report import plots, reference
from shared.apps.report.data import (
    FUNNEL_COLUMNS,
    RunData,
    chunk_tracks,
    decision_rows,
    funnel,
    gates_with_decisions,
    lineage,
    lineage_counts,
    test_differences,
    test_rows,
    verification,
)
from shared.apps.report.document import Document, Heading, Image, Paragraph, Table

FIGURES_DIR = "report"
FUNNEL_LABELS = ("all-wrong groups", "failed retries", "deficits", "cards", "verified",
                 "eligible", "candidates")  # fmt: skip


def _percent(value: float | None) -> str | None:
    return None if value is None else f"{100 * value:.1f}%"


def _interval(low: float | None, high: float | None, scale: float = 1.0, unit: str = "") -> str:
    if low is None or high is None:
        return "-"
    return f"[{scale * low:+.3g}{unit}, {scale * high:+.3g}{unit}]"


def build(run: RunData) -> Document:
    figures = run.run_dir / FIGURES_DIR
    policy = (run.summary or {}).get("policy", "?")
    document = Document(f"IntraSkill run report: {run.run_dir.name}")
    document.add(
        Paragraph(
            f"Run folder {run.run_dir} (policy: {policy}). Generated "
            f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC from metrics.jsonl, summary.json, the "
            "test evaluation and the registry snapshot. "
            f"Beside this run: the {reference.ATTRIBUTION}."
        )
    )
    _overview(document, run)
    _training(document, run, figures)
    _funnel(document, run, figures)
    _lineage(document, run, figures)
    _gates(document, run, figures)
    _test(document, run, figures)
    return document


def _overview(document: Document, run: RunData) -> None:
    rounds = (run.summary or {}).get("rounds", [])
    if not rounds:
        return
    document.add(Heading("Rounds at a glance"))
    keys = ("round", "bank_id", "bank_size", "cards", "eligible", "candidates", "admitted")
    document.add(
        Table(
            ["round", "bank", "bank size", "cards", "eligible", "candidates", "admitted", "gate"],
            [[r.get(k) for k in keys] + [r.get("gate_status")] for r in rounds],
            caption="per round: the bank trained under, the slow loop's output, the gate",
        )
    )


def _training(document: Document, run: RunData, figures: Path) -> None:
    document.add(Heading("Training curves"))
    png = plots.training_curves(run.metrics, figures / "training.png")
    if png is None:
        document.add(Paragraph("No metrics.jsonl in this run folder: no training curves."))
        return
    last = run.metrics[-1]
    totals = [
        ("rollout steps", len(run.metrics)),
        ("episodes generated", sum(m.get("episodes_generated", 0) or 0 for m in run.metrics)),
        ("episodes admitted", sum(m.get("episodes_admitted", 0) or 0 for m in run.metrics)),
        ("optimizer updates", sum(m.get("optimizer_updates", 0) or 0 for m in run.metrics)),
        ("last round", last.get("round")),
    ]
    document.add(
        Image(png, "training curves"),
        Table(["total", "value"], totals, caption="this run's training totals"),
    )


def _funnel(document: Document, run: RunData, figures: Path) -> None:
    document.add(Heading("Slow-loop funnel per round"))
    counts = funnel(run)
    rows: list[list[Any]] = [
        [f"this run, round {r}", *(row.get(k) for k in FUNNEL_COLUMNS)] for r, row in counts.items()
    ]
    rows += [
        [f"reference, round {r}", *(row.get(k) for k in FUNNEL_COLUMNS)]
        for r, row in reference.FUNNEL.items()
    ]
    if not counts:
        document.add(
            Paragraph("No slow-loop records in this run (no summary funnel, no evidence).")
        )
    document.add(
        Table(
            ["", *FUNNEL_LABELS],
            rows,
            caption="all-wrong groups -> full-skill retries that failed -> cards -> verified "
            "(the paired check passed) -> eligible (verified, and the firewall passed) -> "
            "candidates; deficits are retries that succeeded (no proposal)",
        ),
        Image(plots.funnel_chart(counts, figures / "funnel.png"), "funnel") if counts else None,
    )
    _verification(document, run)


VERIFICATION_COLUMNS = ("stage", "checked", "verified", "with", "without", "verified_cards")
VERIFICATION_LABELS = ("", "cards checked", "verified", "successes with", "successes without",
                       "verified cards (with vs without, of k)")  # fmt: skip


def _verification(document: Document, run: RunData) -> None:
    checked = verification(run)
    if not checked:
        return
    document.add(
        Table(
            list(VERIFICATION_LABELS),
            [
                [row[key] if row[key] != "" else None for key in VERIFICATION_COLUMNS]
                for row in checked
            ],
            caption="paired verification: k continuations from each card's branch with its "
            "repair and k without it, same seeds and blind agent; verified = at least one "
            "success with the repair and more with than without",
        )
    )


def _lineage(document: Document, run: RunData, figures: Path) -> None:
    document.add(Heading("Bank lineage"))
    banks = lineage(run.snapshot)
    if not banks:
        document.add(Paragraph("No registry snapshot (registry.json): no bank lineage."))
        return
    counts = lineage_counts(banks)
    document.add(
        Table(
            [
                "bank",
                "round",
                "size",
                "added",
                "rewritten",
                "retired",
                "kept",
                "rho min",
                "rho max",
            ],
            [
                [
                    f"S{i} (bank {c['bank_id']})",
                    c["round"],
                    c["size"],
                    c["added"],
                    c["rewritten"],
                    c["retired"],
                    c["kept"],
                    c["rho_min"],
                    c["rho_max"],
                ]
                for i, c in enumerate(counts)
            ],
            caption="the banks the alias current pointed at, in order; changes against the "
            "previous one. "
            f"Reference bank sizes S0..S4: {', '.join(map(str, reference.BANK_SIZES))}",
        )
    )
    tracks = chunk_tracks(banks)
    png = plots.bank_lineage(banks, tracks, figures / "lineage.png")
    document.add(Image(png, "bank lineage") if png else None)
    document.add(
        Table(
            ["chunk", "title", *(f"S{i}" for i in range(len(banks)))],
            [
                [
                    t.slug,
                    t.title,
                    *(
                        f"{t.change(i)} v{c['version']} rho {c['rho']:.2f}"
                        if c
                        else (t.change(i) or "")
                        for i, c in enumerate(t.cells)
                    ),
                ]
                for t in tracks
            ],
            caption="per chunk: status in each bank, version and inclusion probability",
        )
    )


def _gates(document: Document, run: RunData, figures: Path) -> None:
    document.add(Heading("Gate decisions"))
    gates = gates_with_decisions(run.snapshot)
    if not gates:
        document.add(Paragraph("No gate decisions in the registry snapshot."))
        return
    for gate in gates:
        rows = decision_rows(gate)
        decision = gate["decision"]
        title = f"Gate {gate['id']}: {gate['kind']}, round {gate['round']}, {gate['status']}"
        if decision.get("provisional"):
            title += " (provisional: never adopted)"
        document.add(
            Heading(title, level=3),
            Paragraph(
                f"checkpoint {gate['checkpoint_id']}, {decision['n_observations']} of "
                f"{gate.get('n_tasks') or '?'} planned tasks, base bank "
                f"{gate.get('base_bank_id') or '-'}, K = {gate['budget']}, mask seed "
                f"{gate['mask_seed']}."
            ),
            Image(
                plots.gate_coefficients(gate, rows, figures / f"gate-{gate['id']}.png"),
                f"gate {gate['id']} coefficients",
            ),
            Table(
                [
                    "column",
                    "kind",
                    "coefficient",
                    "HC3 95% interval",
                    "95% lower bound",
                    "status",
                    "rank",
                ],
                [
                    [
                        r["label"],
                        r["kind"],
                        None if r["coefficient"] is None else f"{r['coefficient']:+.4f}",
                        _interval(r["ci_low"], r["ci_high"]),
                        None if r["lower_bound"] is None else f"{r['lower_bound']:+.4f}",
                        r["status"],
                        r["rank"],
                    ]
                    for r in rows
                ],
                caption="strict-reward coefficients (paired delta OLS, no intercept)",
            ),
        )


def _test(document: Document, run: RunData, figures: Path) -> None:
    document.add(Heading("Test set: four conditions"))
    rows = test_rows(run)
    if not rows:
        document.add(Paragraph("No test evaluation in this run folder."))
        return
    n = (run.evaluation or {}).get("n_tasks")
    document.add(
        Image(plots.test_success(rows, figures / "test.png"), "test success"),
        Table(
            ["condition", "success", "95% interval", "strict reward", "steps", "reference success"],
            [
                [
                    r["condition"],
                    _percent(r["success"]),
                    f"[{_percent(r['success_ci'][0])}, {_percent(r['success_ci'][1])}]"
                    if r["success_ci"]
                    else "-",
                    r["r_strict"],
                    r["steps"],
                    _percent(reference.TEST.get(r["condition"], (None, None))[1]),
                ]
                for r in rows
            ],
            caption=f"{n or '?'} paired test tasks, one rollout per task per condition",
        ),
    )
    differences = test_differences(run)
    if differences:
        document.add(
            Table(
                [
                    "a - b",
                    "success difference",
                    "95% paired interval",
                    "flips f->s / s->f",
                    "reference",
                ],
                [
                    [
                        d["label"],
                        f"{100 * d['estimate']:+.1f} pp",
                        _interval(d["low"], d["high"], scale=100, unit=" pp"),
                        f"{d['flips'].get('fail_to_success', '-')} / "
                        f"{d['flips'].get('success_to_fail', '-')}",
                        _reference_difference(d["a"], d["b"]),
                    ]
                    for d in differences
                ],
                caption="task-paired percentile bootstrap (the evaluator's)",
            )
        )


def _reference_difference(a: str, b: str) -> str:
    found = reference.TEST_DIFFERENCES.get((a, b))
    if found is None:
        return "-"
    estimate, low, high = found
    return f"{estimate:+.2f} pp [{low:+.2f}, {high:+.2f}]"
