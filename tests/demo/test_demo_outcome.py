"""The issue's bar for `intraskill demo --policy procedural`, at the demo's own scale: the bank
the loop builds makes the skill-following TEST DOUBLE succeed where it fails bare. Slow (about 2.5
minutes): the run's seeds follow its folder, so each run is a fresh draw of the whole loop."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_the_procedural_demo_beats_base_bare_clearly_and_significantly(tmp_path):
    run_dir = tmp_path / "demo"
    command = [sys.executable, "-m", "shared.apps.cli", "demo", "--policy", "procedural"]
    done = subprocess.run(
        [*command, "--out", str(run_dir)], capture_output=True, text=True, timeout=1200
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [r["round"] for r in summary["rounds"]] == [0, 1, 2]
    assert summary["final_bank_id"] != summary["s0_bank_id"], "the bank never evolved"
    # clear: at least 15 points of test success; significant: the paired 95% interval excludes 0
    gain = summary["test_differences"]["trained/S_T - base/bare"]
    assert gain["estimate"] >= 0.15 and gain["low"] > 0, gain
