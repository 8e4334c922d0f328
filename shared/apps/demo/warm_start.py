"""The demo's warm-start phase: the base policy's weights (warm-started for the model, cached by
fingerprint) registered as the run's base checkpoint, and the trainer's config that starts
from them."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from shared.apps.demo.children import last_json_line
from shared.apps.demo.options import DemoError, DemoOptions
from shared.apps.demo.session import DemoSession


def register_base_checkpoint(session: DemoSession) -> None:
    """The base policy's weights (warm-started for the model) registered as a checkpoint."""
    if session.state.done("warm start"):
        return
    if session.options.policy == "model":
        session.display.phase("warm start", "SFT on heuristic trajectories (cached)")
        summary = warm_start(session)
        base_dir, note = Path(summary["path"]), f"warm start {summary.get('checkpoint_id')}"
    else:
        session.display.phase("warm start", "none for a test-double policy")
        from shared.runtime.agent.models import resolve_model

        base_dir, note = resolve_model(session.facts.model), "test double: no warm start"
    config = train_config(session.options, session.run_dir, base_dir)
    checkpoint_id = f"{session.run_id}-base"
    session.registry("trainer").request(
        "POST",
        "/v1/checkpoints",
        json={"id": checkpoint_id, "uri": base_dir.as_uri(), "step": 0, "round": 0},
        idempotency_key=f"{session.run_id}:checkpoint:base",
        ok=(200, 201, 409),
    )
    session.state.finish(
        "warm start", base_checkpoint=checkpoint_id, base_dir=str(base_dir), config=str(config)
    )
    session.display.note(f"base checkpoint {checkpoint_id} ({note})")


def warm_start(session: DemoSession) -> dict[str, Any]:
    """The SFT warm start as a child process (cached by fingerprint), unless the config turns it
    off (the paper's base model already acts validly): then the base is the configured model."""
    options = session.options
    preset = tomllib.loads(options.config.read_text())
    if not preset.get("warm_start", {}).get("enabled", False):
        from shared.runtime.agent.models import resolve_model

        return {"path": str(resolve_model(preset["model"])), "checkpoint_id": "none (disabled)"}
    log = session.run_dir / "logs" / "warm-start.log"
    output = session.children.run("warm start", warm_start_argv(options), log, env={})
    summary = last_json_line(output)
    if summary is None:
        raise DemoError(f"warm start printed no JSON summary; see {log}")
    return summary


def warm_start_argv(options: DemoOptions) -> list[str]:
    """`train warm-start`, with the evaluation size and hint share only where chosen (unset,
    the config's `[warm_start]` values apply and the plain warm start keeps its cache)."""
    argv = ["train", "warm-start", "--config", str(options.config), "--json"]
    if options.warm_start_eval_tasks is not None:
        argv += ["--eval-tasks", str(options.warm_start_eval_tasks)]
    if options.warm_start_reading_hints is not None:
        argv += ["--reading-hints", str(options.warm_start_reading_hints)]
    return argv


def train_config(options: DemoOptions, run_dir: Path, base_dir: Path) -> Path:
    """The trainer's config for this run: the preset, with the base weights for the model."""
    text = options.config.read_text()
    if options.policy == "model":
        text, replaced = re.subn(
            r"^model\s*=.*$", f'model = "{base_dir}"', text, count=1, flags=re.M
        )
        if not replaced:
            text = f'model = "{base_dir}"\n' + text
        text = without_warm_start(text)
    path = run_dir / "train-config.toml"
    path.write_text(text)
    return path


def without_warm_start(text: str) -> str:
    """The preset's TOML with `[warm_start] enabled = false`: its `model` already is the warm
    start's result, and SFT on top of it would train a second, different warm start."""
    head, marker, section = text.partition("[warm_start]")
    if not marker:
        return text
    body, next_header, rest = section.partition("\n[")
    body, replaced = re.subn(r"^enabled\s*=.*$", "enabled = false", body, count=1, flags=re.M)
    if not replaced:
        body = "\nenabled = false" + body
    return head + marker + body + next_header + rest
