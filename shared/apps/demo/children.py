"""The demo's `intraskill` children (warm start, training): one at a time, each in its own
session with its output in a log, stopped on the way out whatever happened."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from shared.apps.demo.display import DemoDisplay
from shared.apps.demo.options import DemoError
from shared.apps.demo.services import demo_marker


class Children:
    """Runs `intraskill ARGV` children of one run folder; `stop()` ends the running one."""

    def __init__(self, run_dir: Path, display: DemoDisplay) -> None:
        self.run_dir, self.display = run_dir, display
        self.running: subprocess.Popen | None = None

    def run(
        self, name: str, argv: list[str], log: Path, *, env: dict[str, str],
        follow: Path | None = None,
    ) -> str:  # fmt: skip
        """`intraskill ARGV`, output to `log`; returns the output. With `follow`, the display
        shows the training in that folder, else the child's latest line."""
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a") as out:
            out.write(f"\n$ intraskill {' '.join(argv)}\n")
            out.flush()
            start = out.tell()
            self.running = subprocess.Popen(
                [sys.executable, "-m", "shared.apps.cli", *argv],
                env={**os.environ, **demo_marker(self.run_dir), **env},
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            while self.running.poll() is None:
                if follow is not None:
                    follow_training(self.display, follow)
                else:
                    self.display.phase(name, last_line(log))
                time.sleep(1.0)
        code = self.running.returncode
        self.running = None
        text = log.read_text(errors="replace")[start:]
        if code != 0:
            raise DemoError(f"{name} exited with code {code}; the end of {log}:\n{text[-2500:]}")
        return text

    def stop(self) -> None:
        """SIGINT (the trainer saves its state), then SIGTERM, then SIGKILL to its group."""
        if self.running is None or self.running.poll() is not None:
            return
        self.display.note("stopping the trainer ...")
        for signum, grace in ((signal.SIGINT, 30), (signal.SIGTERM, 15), (signal.SIGKILL, 5)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.running.pid, signum)
            try:
                self.running.wait(timeout=grace)
                return
            except subprocess.TimeoutExpired:
                continue


def follow_training(display: DemoDisplay, train_dir: Path) -> None:
    """Show a training child's steps, round and phase from its `state.json` and metrics."""
    from shared.apps.report.data import read_metrics

    state_path = train_dir / "state.json"
    metrics = read_metrics(train_dir / "metrics.jsonl")
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    episodes = sum(int(m.get("episodes_generated") or 0) for m in metrics)
    phase = state.get("phase", "starting")
    display.steps(len(metrics), round_index=state.get("round"), episodes=episodes, phase=phase)
    display.phase("train", f"round {state.get('round', 0)}: {phase}")


def last_line(log: Path, width: int = 70) -> str:
    """The child's latest output line (progress bars rewrite theirs with carriage returns)."""
    with log.open("rb") as handle:
        handle.seek(max(0, log.stat().st_size - 4096))
        tail = handle.read().decode(errors="replace")
    pieces = [p.strip() for p in tail.replace("\r", "\n").splitlines() if p.strip()]
    return pieces[-1][:width] if pieces else ""


def last_json_line(output: str) -> dict[str, Any] | None:
    """The last line of `output` that is a JSON object (progress and log lines come before it)."""
    for line in reversed(output.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None
