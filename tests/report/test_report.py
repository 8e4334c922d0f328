"""`intraskill report RUN_DIR` on a synthetic run folder and on a live registry's snapshot.

Expected values are the ones `synthetic_run.py` wrote down, and the reference run's released
figures as docs/method.md lists them.
"""

from __future__ import annotations

import base64
import re

import pytest
from PIL import Image

from shared.apps.report.cli import main as report
from shared.contracts.registry_api.client import RegistryClient
from tests.operator.live_registry import live_registry
from tests.report.synthetic_run import write_run


def md_row(markdown: str, first_cell: str) -> list[str]:
    for line in markdown.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == first_cell:
            return cells
    raise AssertionError(f"no table row starting {first_cell!r}")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The synthetic run, reported once (drawing the figures is the slow part)."""
    folder = write_run(tmp_path_factory.mktemp("report") / "run")
    assert report([str(folder)]) == 0
    return folder


def test_report_is_one_self_contained_html_and_a_markdown_with_pngs(run):
    page = (run / "report.html").read_text()
    images = re.findall(r'<img alt="[^"]*" src="([^"]+)"', page)
    # training, funnel, lineage, three gates, test
    assert len(images) == 7
    assert all(src.startswith("data:image/png;base64,") for src in images)
    assert not re.search(r'(src|href)="(?!data:)', page), "the page must not load anything else"
    markdown = (run / "report.md").read_text()
    linked = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown)
    assert len(linked) == 7
    for name in linked:
        with Image.open(run / name) as png:
            assert png.format == "PNG" and png.width >= 800 and png.height >= 250
    first = base64.b64decode(images[0].split(",", 1)[1])
    assert first == (run / linked[0]).read_bytes()


def test_training_totals_add_up_the_step_lines(run):
    markdown = (run / "report.md").read_text()
    # 2 rounds x 4 steps of 64 generated / 32 admitted episodes and 2 updates; the torn last
    # line is skipped
    assert md_row(markdown, "rollout steps")[1] == "8"
    assert md_row(markdown, "episodes generated")[1] == "512"
    assert md_row(markdown, "episodes admitted")[1] == "256"
    assert md_row(markdown, "optimizer updates")[1] == "16"


def test_funnel_sits_beside_the_reference_figures(run):
    markdown = (run / "report.md").read_text()
    # columns: all-wrong, failed retries, deficits, cards, verified, eligible, candidates (the
    # reference publishes no verified count)
    assert md_row(markdown, "this run, round 0")[1:] == ["7", "5", "2", "5", "4", "3", "2"]
    assert md_row(markdown, "this run, round 1")[1:] == ["4", "3", "1", "3", "1", "1", "1"]
    assert md_row(markdown, "reference, round 0")[1:] == ["104", "87", "9", "87", "-", "61", "6"]
    assert md_row(markdown, "reference, round 3")[1:] == ["39", "39", "0", "39", "-", "11", "4"]


def test_paired_verification_counts_per_round(run):
    markdown = (run / "report.md").read_text()
    # round 0: 5 checked, 4 verified (3-0, 2-1, 1-0, 4-2; 1-1 is not), 11 with, 4 without
    assert md_row(markdown, "round 0") == [
        "round 0", "5", "4", "11", "4", "#1 3 vs 0 of 4, #2 2 vs 1 of 4, #3 1 vs 0 of 4, "
        "#4 4 vs 2 of 4",
    ]  # fmt: skip
    # round 1: 0-0 and 2-2 do not verify
    assert md_row(markdown, "round 1") == ["round 1", "3", "1", "4", "2", "#6 2 vs 0 of 4"]


def test_lineage_gates_and_test_tables(run):
    markdown = (run / "report.md").read_text()
    assert md_row(markdown, "price-check")[2:] == [
        "added v1 rho 0.50",
        "rewritten v2 rho 0.90",
        "kept v2 rho 0.70",
    ]
    assert md_row(markdown, "persona-evidence")[3] == "retired"
    assert md_row(markdown, "query-constraints")[4] == "retired"
    # S1: one added (option-axes), one rewritten (price-check), one retired (persona-evidence)
    assert md_row(markdown, "S1 (bank 2)")[1:7] == ["1", "3", "1", "1", "1", "1"]
    assert "Reference bank sizes S0..S4: 10, 7, 5, 8, 8" in markdown
    assert md_row(markdown, "price-check v2")[1:6] == [
        "rewrite",
        "+0.1200",
        "[+0.06, +0.18]",
        "+0.0696",  # the one-sided 95% lower bound: 0.12 - 1.6449 x 0.06 / 1.96
        "selected",
    ]
    gate_2 = markdown[markdown.index("### Gate 2") : markdown.index("### Gate 3")]
    assert md_row(gate_2, "price-check v1")[5] == "rewrite_loser"
    assert md_row(markdown, "trained/S_T")[1:3] == ["80.0%", "[72.0%, 88.0%]"]
    assert md_row(markdown, "trained/S_T")[-1] == "86.2%"  # the reference's 86.25%
    assert md_row(markdown, "trained/S_T - base/bare")[1:4] == [
        "+55.0 pp",
        "[+43 pp, +67 pp]",
        "23 / 1",
    ]


def test_a_folder_with_nothing_yet_still_reports_what_is_missing(tmp_path, capsys):
    assert report([str(tmp_path)]) == 0
    markdown = (tmp_path / "report.md").read_text()
    assert "No metrics.jsonl" in markdown and "No test evaluation" in markdown
    assert report([str(tmp_path / "absent")]) == 1
    assert "no run folder" in capsys.readouterr().err


def test_registry_snapshot_feeds_lineage_and_gates(tmp_path, monkeypatch):
    content = {
        "applies_when": "a budget is stated",
        "procedure": ["compare the price with the budget"],
        "verify": "within budget",
        "avoid": "buying blind",
    }
    with live_registry("sqlite", tmp_path) as live:
        with RegistryClient(live.url, live.tokens["operator"]) as client:
            a = client.create_chunk("price", {"title": "Price", **content}, source="cold_start")
            b = client.create_chunk("query", {"title": "Query", **content}, source="cold_start")
            s0 = client.create_bank([{"chunk_version_id": a.latest.id, "rho": 0.9}])
            client.freeze_bank(s0.id)
            client.create_alias("current", s0.id, reason="cold start")
            s1 = client.create_bank(
                [{"chunk_version_id": b.latest.id, "rho": 0.4}], round=1, parent_bank_id=s0.id
            )
            client.freeze_bank(s1.id)
            client.move_alias(
                "current", s1.id, reason="gate", if_match=client.get_alias("current").etag
            )
            client.create_checkpoint("base", uri="file:///base", step=0, round=0)
            run = client.create_gate_run(
                {
                    "kind": "gate_a",
                    "round": 0,
                    "checkpoint_id": "base",
                    "candidate_pool": {
                        "columns": [
                            {"chunk_version_id": a.latest.id, "kind": "draft", "slot": 0},
                            {"chunk_version_id": b.latest.id, "kind": "draft", "slot": 1},
                        ]
                    },
                    "mask_seed": 1,
                    "n_tasks": 4,
                    "identity": {
                        "model": "m",
                        "decoding": "d",
                        "prompt_version": "p",
                        "prompt_fingerprint": "f",
                        "env_version": "e",
                        "action_protocol": "a",
                    },
                    "bare_baseline": {"source": "fresh", "plan_sha256": "ab" * 32},
                }
            )
            rows = [
                {
                    "chunk_version_id": version,
                    "coefficients": {"r_strict": coef},
                    "status": status,
                    "rank": rank,
                    "ci_low": {"r_strict": coef - 0.1},
                    "ci_high": {"r_strict": coef + 0.1},
                }
                for version, coef, status, rank in (
                    (a.latest.id, 0.25, "selected", 1),
                    (b.latest.id, -0.05, "non_positive", None),
                )
            ]
            reward = dict.fromkeys(
                ("r_strict", "r_success", "r_type", "r_att", "r_option", "r_price", "r_loose"), 0.0
            )
            client.add_observations(
                run.id,
                [  # 3 of the 4 planned tasks: an incomplete gate, hence a provisional fit
                    {"task_id": f"t{i}", "inclusion": mask, "bare": reward, "masked": reward}
                    for i, mask in enumerate(([1, 0], [0, 1], [1, 1]))
                ],
            )
            client.post_decision(run.id, {"rows": rows, "provisional": True})
        monkeypatch.setenv("INTRASKILL_REGISTRY_TOKEN", live.tokens["reader"])
        folder = tmp_path / "run"
        folder.mkdir()
        assert report([str(folder), "--registry", live.url]) == 0
    markdown = (folder / "report.md").read_text()
    assert md_row(markdown, "price")[2:4] == ["added v1 rho 0.90", "retired"]
    assert md_row(markdown, "query")[2:4] == ["", "added v1 rho 0.40"]
    assert "provisional: never adopted" in markdown
    assert md_row(markdown, "price v1")[1:4] == ["draft", "+0.2500", "[+0.15, +0.35]"]
    assert md_row(markdown, "price v1")[5] == "selected"
    assert (folder / "report" / f"gate-{run.id}.png").exists()


def test_every_gate_coefficient_shows_its_interval_and_one_sided_lower_bound(run):
    markdown = (run / "report.md").read_text()
    # gate 1's query-constraints v1: beta 0.10, HC3 SE 0.06 / 1.96; the one-sided 95% lower
    # bound is beta - 1.6449 SE = 0.10 - 0.0504 (the normal's 95th percentile, not 1.96)
    row = md_row(markdown, "query-constraints v1")
    assert row[2:5] == ["+0.1000", "[+0.04, +0.16]", "+0.0496"]
