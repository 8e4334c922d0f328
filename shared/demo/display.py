"""One progress display for the whole demo: the phase, and the training steps with an ETA."""

from __future__ import annotations

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

PHASES = ("services", "environment", "warm start", "cold start", "train", "test", "report")


class DemoDisplay:
    """Two rows: `phase i/n: what is happening`, and `rollout steps` with episodes and ETA."""

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

    def __enter__(self) -> DemoDisplay:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)

    def phase(self, name: str, detail: str = "") -> None:
        index = PHASES.index(name)
        text = f"phase {index + 1}/{len(PHASES)} {name}" + (f": {detail}" if detail else "")
        self.progress.update(self.phase_task, description=text, completed=index)

    def steps(self, done: int, *, round_index: int | None, episodes: int, phase: str) -> None:
        where = f"round {round_index}" if round_index is not None else "training"
        self.progress.update(
            self.steps_task,
            completed=done,
            description=f"rollout steps ({where}, {phase}; {episodes:,} episodes generated)",
        )

    def note(self, text: str) -> None:
        self.progress.console.print(text, highlight=False)

    def finish(self) -> None:
        self.progress.update(self.phase_task, completed=len(PHASES), description="done")
