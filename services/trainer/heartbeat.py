"""A heartbeat file in the run folder while the trainer waits on another service.

On Kubernetes the trainer's liveness probe is progress: "something in the run folder changed in
the last 90 minutes" (deploy/k8s/base/trainer.yaml). A rollout step writes metrics, but while
the trainer waits on a compile or a gate it writes nothing, and a 400-task gate can take longer
than the probe's window; the heartbeat keeps a waiting trainer alive without hiding a stuck
one (a hung step still goes silent).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HEARTBEAT_FILE = "heartbeat"
HEARTBEAT_EVERY_S = 60.0


@contextmanager
def heartbeat(folder: Path, every_s: float | None = None) -> Iterator[Path]:
    """Touch `folder/heartbeat` now and every `every_s` seconds (default HEARTBEAT_EVERY_S)
    until the block ends."""
    path = Path(folder) / HEARTBEAT_FILE
    every_s = every_s or HEARTBEAT_EVERY_S
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every_s):
            path.touch()

    path.touch()  # before the block starts, so a wait that begins now is already covered
    thread = threading.Thread(target=beat, name="trainer-heartbeat", daemon=True)
    thread.start()
    try:
        yield path
    finally:
        stop.set()
        thread.join()
