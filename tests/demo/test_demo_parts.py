"""The demo's parts that stand alone: run ids, the trainer config it writes, its state file,
the summary's arithmetic, and child processes that start, fail and stop as they should."""

from __future__ import annotations

import os
import re
from pathlib import Path

import httpx
import pytest

from shared.apps.demo.children import last_json_line, last_line
from shared.apps.demo.options import DemoOptions, PresetFacts, run_id_for
from shared.apps.demo.session import DemoSession
from shared.apps.demo.state import DemoState
from shared.apps.demo.summary import condition_table, policy_statement, success_interval
from shared.apps.demo.warm_start import train_config, warm_start
from shared.kit.loopback import (
    ServiceFailed,
    free_port,
    mint_tokens,
    start_registry,
    start_service,
)

HERE = Path(__file__).parent
TINY = HERE / "demo-tiny.toml"
REPO = HERE.parents[1]


def test_run_ids_differ_for_folders_of_the_same_name(tmp_path):
    a, b = tmp_path / "a" / "demo", tmp_path / "b" / "demo"
    assert run_id_for(a) != run_id_for(b)
    assert run_id_for(a) == run_id_for(a)
    assert run_id_for(a).startswith("demo-")


def test_preset_facts_come_from_the_toml(tmp_path):
    facts = PresetFacts.read(TINY)
    assert (facts.steps_per_round, facts.env_preset, facts.val_tasks, facts.model) == (
        1,
        "test",
        16,
        "tiny",
    )


def test_the_model_policy_trains_from_the_warm_started_weights(tmp_path):
    options = DemoOptions(policy="model", out=tmp_path, config=TINY)
    written = train_config(options, tmp_path, Path("/weights/warm-abc"))
    text = written.read_text()
    assert 'model = "/weights/warm-abc"' in text and 'model = "tiny"' not in text
    assert text.count("\nmodel = ") + text.startswith("model = ") == 1
    options = DemoOptions(policy="procedural", out=tmp_path, config=TINY)
    assert 'model = "tiny"' in train_config(options, tmp_path, Path("/weights/x")).read_text()


def test_the_trainer_does_not_warm_start_the_warm_started_weights_again(tmp_path):
    """The demo ran the warm start; a second SFT on its result would cost minutes and train
    a different policy from the one registered as the base checkpoint."""
    from services.trainer.config import TrainerConfig

    options = DemoOptions(policy="model", out=tmp_path, config=REPO / "configs" / "cpu.toml")
    config = TrainerConfig.from_toml(train_config(options, tmp_path, Path("/weights/warm-abc")))
    assert config.model == "/weights/warm-abc"
    assert config.warm_start.enabled is False
    preset = TrainerConfig.from_toml(REPO / "configs" / "cpu.toml")
    assert preset.warm_start.enabled is True  # the preset itself still warm-starts
    assert config.with_(model=preset.model, warm_start=preset.warm_start) == preset


def test_state_survives_a_restart_and_refuses_other_options(tmp_path):
    state = DemoState(tmp_path)
    assert not state.resumed
    state.finish("environment", splits={"train": 60})
    again = DemoState(tmp_path)
    assert again.resumed and again.done("environment") and not again.done("train")
    assert again.get("splits") == {"train": 60}


def test_wilson_interval_matches_the_textbook_values():
    # 8 successes in 10: Wilson 95% interval (0.4902, 0.9433), as published tables give it
    low, high = success_interval(0.8, 10)
    assert low == pytest.approx(0.4902, abs=1e-4) and high == pytest.approx(0.9433, abs=1e-4)
    low, high = success_interval(0.0, 40)
    assert low == pytest.approx(0.0, abs=1e-12) and high == pytest.approx(0.0876, abs=1e-4)


def test_test_table_keeps_the_four_conditions_in_order():
    evaluation = {
        "n_tasks": 10,
        "conditions": {
            "trained/S_T": {"metrics": {"r_success": 0.8, "r_strict": 0.81}},
            "base/bare": {"metrics": {"r_success": 0.2, "r_strict": 0.25}},
        },
    }
    table = condition_table(evaluation)
    assert list(table) == ["base/bare", "trained/S_T"]
    assert table["trained/S_T"]["success_ci"] == pytest.approx([0.4902, 0.9433], abs=1e-4)


def test_a_service_that_cannot_start_says_so_with_its_log(tmp_path):
    port = free_port()
    bad = start_service(
        "registry",
        ["registry", "serve", "--port", "not-a-port"],
        port=port,
        env={},
        log=tmp_path / "bad.log",
    )
    with pytest.raises(ServiceFailed, match=r"exited with code \d+ before it was ready"):
        bad.wait_ready(timeout=60)
    assert "Invalid value for '--port'" in bad.log_tail()


def test_stop_ends_the_service_and_frees_its_port(tmp_path):
    _, grants = mint_tokens("t")
    registry = start_registry(
        database_url=f"sqlite:///{tmp_path / 'r.sqlite'}", grants=grants, log=tmp_path / "r.log"
    )
    try:
        registry.wait_ready(timeout=90)
        # readiness: the registry's /readyz (its database answers), not just a live process
        assert httpx.get(f"{registry.url}/readyz", timeout=5).status_code == 200
    finally:
        registry.stop()
    assert registry.process.poll() is not None
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{registry.url}/healthz", timeout=2)
    # the child ran in its own session: nothing of its group is left
    with pytest.raises(ProcessLookupError):
        os.killpg(registry.process.pid, 0)


def test_the_display_shows_a_childs_latest_line_even_mid_progress_bar(tmp_path):
    log = tmp_path / "child.log"
    log.write_text("loading\nsft  10%|#   | 1/10\rsft  20%|##  | 2/10\r\n\n")
    assert last_line(log) == "sft  20%|##  | 2/10"
    log.write_text("")
    assert last_line(log) == ""


def test_the_warm_start_summary_is_the_last_json_line_not_the_first_brace():
    # what `intraskill train warm-start --json` really prints: rich log lines holding Python
    # dicts, a progress bar, then the JSON summary on its own line
    output = (
        "[15:16:55] warm start: teacher trajectories {'episodes': 400,  warm_start.py:448\n"
        "           'success_rate': 0.4275}\n"
        "teacher trajectories ━━━━━━━━━━ 400/400 0:00:01\n"
        '{"schema": "intraskill-warm-start-v1", "path": "runs/warm-start/w", "cached": true}\n'
    )
    assert last_json_line(output) == {
        "schema": "intraskill-warm-start-v1",
        "path": "runs/warm-start/w",
        "cached": True,
    }
    assert last_json_line("no summary {'a': 1}\n") is None


def test_the_procedural_summary_says_its_trained_conditions_involve_no_weights():
    # the issue: the procedural demo's gain is planted (cue phrases the rules backend writes)
    # and its "trained" conditions act with no weights; the model's act with its trained weights
    procedural = policy_statement("procedural")
    assert procedural["trained_means_weights"] is False
    note = procedural["test_note"].casefold()
    assert "test double" in note and "no weights" in note and "planted" in note
    assert policy_statement("model")["trained_means_weights"] is True


def test_the_test_table_is_followed_by_its_note():
    from rich.console import Console

    from shared.apps.demo.cli import print_summary

    row = {"success": 0.5, "success_ci": [0.3, 0.7], "r_strict": 0.5, "n_tasks": 40}
    summary = {
        "rounds": [], "test": {"base/bare": row}, "final_bank_id": 1, "report": "r.html",
        **policy_statement("procedural"),
    }  # fmt: skip
    console = Console(record=True, width=400)
    print_summary(summary, console, minutes=1.0)
    lines = console.export_text().splitlines()
    table_end = max(i for i, line in enumerate(lines) if "base/bare" in line) + 1
    assert lines[table_end + 1] == policy_statement("procedural")["test_note"]


def test_off_a_terminal_the_display_prints_each_phase_at_once_and_a_row_at_most_every_10_s(
    monkeypatch,
):
    import io

    from rich.console import Console

    from shared.apps.demo import display as display_module
    from shared.apps.demo.display import DemoDisplay

    clock = [1000.0]
    monkeypatch.setattr(display_module.time, "monotonic", lambda: clock[0])

    def lines(terminal: bool) -> list[str]:
        out = io.StringIO()
        console = Console(file=out, force_terminal=terminal, width=200)
        with DemoDisplay(4, console) as display:
            display.phase("warm start", "sft 1/12")
            display.phase("warm start", "sft 2/12")  # same row, 0 s later: not printed
            display.steps(0, round_index=None, episodes=0, phase="starting")  # another row
            clock[0] += 11
            display.phase("warm start", "sft 3/12")  # same row, 11 s later
            display.phase("warm start", "sft 3/12")  # a repeat
            display.phase("cold start", "bare runs 0/32")  # a new phase: at once
        return [line for line in out.getvalue().splitlines() if "phase " in line or "steps" in line]

    plain = lines(terminal=False)
    assert [line.split(" ", 1)[1] for line in plain[:4]] == [
        "phase 3/7 warm start: sft 1/12",
        "rollout steps 0/4 (training, starting; 0 episodes)",
        "phase 3/7 warm start: sft 3/12",
        "phase 4/7 cold start: bare runs 0/32",
    ]
    # on a terminal the bars redraw themselves: no timestamped lines
    assert not any(re.match(r"\d\d:\d\d:\d\d (phase|rollout)", line) for line in lines(True))


def session_with_child(options: DemoOptions, child) -> DemoSession:
    """A session on `options.out` (no services) whose children are run by `child`."""
    session = DemoSession(options, display=None)
    session.children.run = child
    return session


def warm_started(tmp_path):
    """The tiny preset with its warm start on (the demo runs it as a child)."""
    path = tmp_path / "warm.toml"
    path.write_text(
        TINY.read_text().replace("[warm_start]\nenabled = false", "[warm_start]\nenabled = true")
    )
    return path


def test_a_preset_without_a_warm_start_starts_from_its_model_and_runs_no_child(tmp_path):
    """The paper's base model already acts validly: its preset turns the warm start off, and
    the demo (and the experiment, which runs the demo's phases) starts from the model itself."""
    model = tmp_path / "base-model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    preset = tmp_path / "paper-like.toml"
    preset.write_text(f'model = "{model}"\n[warm_start]\nenabled = false\n')
    options = DemoOptions(policy="model", out=tmp_path, config=preset)
    session = session_with_child(options, lambda *_a, **_k: pytest.fail("no warm start child"))
    assert warm_start(session) == {"path": str(model), "checkpoint_id": "none (disabled)"}


def test_the_warm_start_evaluation_size_reaches_the_child_only_when_chosen(tmp_path):
    """An experiment plan may skip the warm start's own before/after evaluation; left unset,
    the config's `[warm_start] eval_tasks` applies (no flag on the child's command line)."""
    seen: list[list[str]] = []

    def child(_name, argv, _log, env):
        seen.append(argv)
        return '{"schema": "intraskill-warm-start-v1", "path": "w"}\n'

    for chosen in (None, 0):
        options = DemoOptions(
            policy="model",
            out=tmp_path,
            config=warm_started(tmp_path),
            warm_start_eval_tasks=chosen,
        )
        warm_start(session_with_child(options, child))
    assert "--eval-tasks" not in seen[0]
    assert seen[1][seen[1].index("--eval-tasks") + 1] == "0"


def test_the_warm_start_hint_share_reaches_the_child_only_when_chosen(tmp_path):
    """The hint-reading warm start is chosen by the plan; left unset, the config's
    `[warm_start] reading_hints` applies (no flag, so the plain warm start keeps its cache)."""
    seen: list[list[str]] = []

    def child(_name, argv, _log, env):
        seen.append(argv)
        return '{"schema": "intraskill-warm-start-v1", "path": "w"}\n'

    for chosen in (None, 0.5):
        options = DemoOptions(
            policy="model", out=tmp_path, config=warm_started(tmp_path),
            warm_start_reading_hints=chosen,
        )  # fmt: skip
        warm_start(session_with_child(options, child))
    assert "--reading-hints" not in seen[0]
    assert seen[1][seen[1].index("--reading-hints") + 1] == "0.5"


def test_the_display_follows_the_training_folder_it_is_given(tmp_path):
    """The experiment's runs train in `runs/NAME/train/`: the display reads that folder's
    state and metrics (it once read `runs/NAME/`, where neither is written)."""
    from shared.apps.demo.children import follow_training

    class Seen:
        def __init__(self):
            self.calls = []

        def steps(self, *args, **kwargs):
            self.calls.append(("steps", args, kwargs))

        def phase(self, *args):
            self.calls.append(("phase", args))

    folder = tmp_path / "runs" / "arm-seed0" / "train"
    folder.mkdir(parents=True)
    (folder / "state.json").write_text('{"round": 1, "phase": "gate"}')
    (folder / "metrics.jsonl").write_text('{"episodes_generated": 8}\n{"episodes_generated": 8}\n')
    display = Seen()
    follow_training(display, folder)
    assert display.calls == [
        ("steps", (2,), {"round_index": 1, "episodes": 16, "phase": "gate"}),
        ("phase", ("train", "round 1: gate")),
    ]
