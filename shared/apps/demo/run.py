"""The demo's phases, in order, each skipped on a rerun once done.

1-4. services, environment, warm start, cold start (`setup.py`);
5. train: `intraskill train run ... --rounds N --initial-bank S_0` as a child process, followed
   through its `state.json` and `metrics.jsonl`;
6. test: the evaluator's four-condition evaluation on the test split;
7. report: `summary.json`, the registry snapshot, `report.md` and `report.html`.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

from shared.apps.demo.display import DemoDisplay
from shared.apps.demo.options import DemoError, DemoOptions
from shared.apps.demo.session import DemoSession
from shared.apps.demo.setup import setup_phases
from shared.runtime.noise_floor import aa_condition


def run_demo(options: DemoOptions, display: DemoDisplay) -> dict[str, Any]:
    session = DemoSession(options, display)
    if session.state.resumed:
        display.note(f"resuming the demo in {session.run_dir}: done {session.state.get('done')}")
    try:
        session.run_phases(
            [
                *setup_phases(session),
                ("train", partial(run_training, session)),
                ("test", partial(run_test, session)),
            ]
        )
        return write_report(session)
    finally:
        session.close()


def train_dir(session: DemoSession) -> Path:
    # named after the run: the trainer derives its registry-visible run id from it
    return session.run_dir / "train" / session.run_id


def run_training(session: DemoSession) -> None:
    if session.state.done("train"):
        return
    session.display.phase("train", f"{session.options.rounds} rounds with gates")
    folder = train_dir(session)
    argv = session.trainer_argv(
        config=session.state.get("config"),
        out=str(folder),
        initial_bank=session.state.get("s0_bank_id"),
        extra=["--rounds", str(session.options.rounds)],
    )
    log = session.run_dir / "logs" / "train.log"
    session.children.run("train", argv, log, env=session.services.trainer_env(), follow=folder)
    record = json.loads((folder / "run.json").read_text())
    if not record.get("finished"):
        raise DemoError(f"the trainer exited without finishing; see {session.run_dir}/logs")
    session.state.finish("train", train_record=str(folder / "run.json"))


def run_test(session: DemoSession) -> None:
    """The four conditions and the A/A control (base/bare again under other sampling seeds:
    the noise floor) on the test split."""
    if session.state.done("test"):
        return
    rounds = json.loads((train_dir(session) / "run.json").read_text())["rounds"]
    trained = rounds[-1]["checkpoint_id"]
    base = session.state.get("base_checkpoint")
    session.display.phase("test", f"4 conditions x {session.options.test_tasks} test tasks")
    conditions = [
        {"name": "base/bare", "checkpoint_id": base},
        {"name": "base/S0", "checkpoint_id": base, "bank_id": session.state.get("s0_bank_id")},
        {"name": "trained/bare", "checkpoint_id": trained},
        {"name": "trained/S_T", "checkpoint_id": trained, "bank_alias": "current"},
    ]
    body = {
        "conditions": [*conditions, aa_condition(conditions[0])],
        "split": "test",
        "n_tasks": session.options.test_tasks,
    }
    result = session.evaluation("test", body)
    folder = session.run_dir / "test"
    folder.mkdir(exist_ok=True)
    (folder / "evaluation.json").write_text(json.dumps(result, indent=1))
    session.state.finish("test")


def write_report(session: DemoSession) -> dict[str, Any]:
    from shared.apps.demo.summary import build_summary
    from shared.apps.report.build import build
    from shared.apps.report.data import load_run
    from shared.apps.report.document import to_html, to_markdown
    from shared.apps.report.snapshot import save_snapshot

    session.display.phase("report", "summary.json, report.md, report.html")
    run_dir, registry = session.run_dir, session.registry("reader")
    summary = build_summary(session, train_dir(session), registry)
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    save_snapshot(registry, run_dir)
    document = build(load_run(run_dir))
    (run_dir / "report.md").write_text(to_markdown(document, run_dir))
    (run_dir / "report.html").write_text(to_html(document))
    session.state.finish("report")
    session.display.finish()
    return summary
