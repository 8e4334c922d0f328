"""`intraskill train run --json-logs` (TRAINER_JSON_LOGS=true), as a real process on the simulated
TEST DOUBLE: everything the run says on stderr is one JSON object per line, in the services'
shape (`time`, `level`, `logger`, `message`), each step's summary among them, and no progress
bar or plain line is left on either stream."""

from __future__ import annotations

import json

from tests.trainer.run_support import CONFIGS, analyst_standin, run_train

TINY = CONFIGS / "simulated-tiny.toml"


def test_a_run_logs_json_lines_only(tmp_path):
    with analyst_standin(tmp_path / "analyst-standin") as analyst:
        done = run_train(
            TINY, tmp_path / "run", "--analyst-url", analyst, "--rounds", "1",
            TRAINER_JSON_LOGS="true",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads(line) for line in done.stderr.splitlines()]  # each line JSON
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
    trainer = [r["message"] for r in records if r["logger"] == "intraskill.trainer"]
    assert any(m.startswith("round 0 step 1: reward") for m in trainer), trainer
    assert any("gate job" in m for m in trainer), trainer
    assert "[" not in "".join(trainer).replace("[]", "")  # markup stripped, not printed
    assert done.stdout == ""  # the plain step lines went to the log instead


def test_a_refused_start_is_a_json_error_line(tmp_path):
    done = run_train(TINY, tmp_path / "run", "--analyst-url", "http://127.0.0.1:9",
                     TRAINER_JSON_LOGS="true", TRAINER_ANALYST_TOKEN="")  # fmt: skip
    assert done.returncode == 1
    (record,) = [json.loads(line) for line in done.stderr.splitlines()]
    assert record["level"] == "ERROR" and "TRAINER_ANALYST_TOKEN" in record["message"]
