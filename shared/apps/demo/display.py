"""One progress display for the whole demo: the phase, and the training steps with an ETA."""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

LINE_SECONDS = 10.0
PHASES = ("services", "environment", "warm start", "cold start", "train", "test", "report")


class DemoDisplay:
    """Two rows: `phase i/n: what is happening`, and `rollout steps` with episodes and ETA.

    Off a terminal (nohup, `kubectl logs`, CI) rich draws the bars only when they end, so the
    rows are also printed as timestamped lines: each new phase at once, and a changed row within
    a phase at most every `LINE_SECONDS` (a child's progress bar changes every second).
    """

    def __init__(self, total_steps: int, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=self.console,
            transient=False,
        )
        self.phase_task = self.progress.add_task("starting", total=len(PHASES))
        self.steps_task = self.progress.add_task("rollout steps", total=total_steps)
        self.total_steps = total_steps
        self.printed: dict[
            str, tuple[str, float]
        ] = {}  # row -> (text, monotonic time) last printed

    def __enter__(self) -> DemoDisplay:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)

    def phase(self, name: str, detail: str = "") -> None:
        index = PHASES.index(name)
        text = f"phase {index + 1}/{len(PHASES)} {name}" + (f": {detail}" if detail else "")
        self.progress.update(self.phase_task, description=text, completed=index)
        self._line(name, text)

    def steps(self, done: int, *, round_index: int | None, episodes: int, phase: str) -> None:
        where = f"round {round_index}" if round_index is not None else "training"
        self.progress.update(
            self.steps_task,
            completed=done,
            description=f"rollout steps ({where}, {phase}; {episodes:,} episodes generated)",
        )
        self._line(
            "steps",
            f"rollout steps {done}/{self.total_steps} ({where}, {phase}; {episodes:,} episodes)",
        )

    def _line(self, row: str, text: str) -> None:
        """The row as a plain line when no terminal redraws the bars; repeats are dropped."""
        last_text, last_time = self.printed.get(row, ("", float("-inf")))
        now = time.monotonic()
        if self.console.is_terminal or text == last_text or now - last_time < LINE_SECONDS:
            return
        self.printed[row] = (text, now)
        self.console.print(f"{time.strftime('%H:%M:%S')} {text}", highlight=False, soft_wrap=True)

    def note(self, text: str) -> None:
        self.progress.console.print(text, highlight=False)

    def finish(self) -> None:
        self.progress.update(self.phase_task, completed=len(PHASES), description="done")
