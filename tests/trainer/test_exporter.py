"""The trainer's metrics port (services/trainer/exporter.py): figures read from a run folder
laid out as the orchestrator writes it, scraped over HTTP as Prometheus would."""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from services.trainer.exporter import serve_run_metrics
from services.trainer.run_context import RunState
from tests.live_servers import free_port


def step_line(step: int, *, generated: int, admitted: int, reward: float, step_s: float) -> str:
    line = {
        "round": 0, "step": step, "episodes_generated": generated,
        "episodes_admitted": admitted, "reward": reward, "success": 0.5,
        "timings": {"step_s": step_s, "update_s": 0.1},
    }  # fmt: skip
    return json.dumps(line) + "\n"


def scrape(url: str) -> dict[tuple[str, frozenset], float]:
    text = httpx.get(url, timeout=30).text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_run_folder_figures_follow_steps_gates_and_a_rewind(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text(
        step_line(0, generated=64, admitted=48, reward=0.25, step_s=10.0)
        + step_line(1, generated=64, admitted=32, reward=0.5, step_s=12.0)
        + '{"round": 0, "step": 2, "episodes_gen'  # a line still being written: not counted
    )
    state = RunState(round=1, phase="gate", step=2, metrics_lines=2, bank_id=3)
    (tmp_path / "state.json").write_text(state.model_dump_json())  # as the trainer writes it
    rounds = [{"round": 0, "gate_status": "complete", "adopted": True}, {"round": 1}]
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r", "rounds": rounds}))
    port = free_port()
    assert serve_run_metrics(tmp_path, port, host="127.0.0.1")
    url = f"http://127.0.0.1:{port}/metrics"

    samples = scrape(url)
    assert samples[("trainer_step_seconds_count", frozenset())] == 2
    assert samples[("trainer_step_seconds_sum", frozenset())] == 22.0
    assert samples[("trainer_episodes_total", frozenset({("stage", "generated")}))] == 128
    assert samples[("trainer_episodes_total", frozenset({("stage", "admitted")}))] == 80
    assert samples[("trainer_reward", frozenset())] == 0.5  # the last step's
    assert samples[("trainer_round", frozenset())] == 1
    assert samples[("trainer_phase", frozenset({("phase", "gate")}))] == 1
    assert samples[("trainer_phase", frozenset({("phase", "train")}))] == 0
    assert samples[("trainer_gates_total", frozenset({("status", "complete")}))] == 1
    assert samples[("trainer_banks_adopted_total", frozenset())] == 1

    # a resume rewinds metrics.jsonl to its first line: the sums start over from the file
    time.sleep(0.01)
    metrics.write_text(step_line(0, generated=64, admitted=48, reward=0.25, step_s=10.0))
    samples = scrape(url)
    assert samples[("trainer_step_seconds_count", frozenset())] == 1
    assert samples[("trainer_episodes_total", frozenset({("stage", "generated")}))] == 64


def test_only_the_main_rank_serves(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("RANK", "1")
    assert not serve_run_metrics(tmp_path, free_port(), host="127.0.0.1")


def test_tensorboard_is_written_or_its_absence_is_said(tmp_path: Path, monkeypatch, caplog) -> None:
    """The train extra installs tensorboard; with it the curves are written, without it the
    trainer says so instead of going quiet."""
    from services.trainer.metrics import MetricsLog

    log = MetricsLog(tmp_path / "metrics.jsonl")
    log.append({"step": 0, "reward": 0.5})
    log.close()
    assert list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))

    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import now fails
    with caplog.at_level(logging.WARNING, logger="services.trainer.metrics"):
        missing = MetricsLog(tmp_path / "again" / "metrics.jsonl")
    assert missing.writer is None
    assert "tensorboard is not installed" in caplog.text
