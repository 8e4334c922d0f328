"""The demo's own record of what is done, so a rerun resumes instead of restarting.

`RUN_DIR/demo-state.json` holds the finished phases and the ids they produced (base checkpoint,
S_0, job ids). It is rewritten atomically after every change; the trainer keeps its own
`train/state.json`, and every write to a service carries an idempotency key, so a phase cut
short by Ctrl-C is simply run again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from shared.kit.files import write_json_atomic

STATE_FILE = "demo-state.json"


class DemoState:
    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / STATE_FILE
        self.data: dict[str, Any] = (
            json.loads(self.path.read_text()) if self.path.exists() else {"done": []}
        )

    @property
    def resumed(self) -> bool:
        return bool(self.data["done"])

    def done(self, phase: str) -> bool:
        return phase in self.data["done"]

    def finish(self, phase: str, **values: Any) -> None:
        self.data.update(values)
        if phase not in self.data["done"]:
            self.data["done"].append(phase)
        self.save()

    def set(self, **values: Any) -> None:
        self.data.update(values)
        self.save()

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def save(self) -> None:
        write_json_atomic(self.path, self.data)
